r"""Sandbox on a GPU: honest kernels must pass with faithful speedups; cheats must not pass.

    python -m benchmarks.sandbox_gpu --kernelbench_dir=.kb --out=/tmp/sandbox_gpu.json

For every honest candidate in benchmarks/candidates/honest/ (level{L}_{id}_{backend}.py, full
KernelBench sizes) it runs the sandbox (SandboxPool, builds in parallel, GPU work serialised) and,
side by side in the same run, times the same reference and candidate with
`triton.testing.do_bench` (median) in a plain process; the two speedups should agree within 10%.
Then it runs every cheat in benchmarks/candidates/cheats/ (header lines `# problem: level1/19_...`
and `# backend: ...`): none may be `correct`. Prints tables and writes all verdicts as JSON.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time

from absl import app
from absl import flags

from kernelzero_jax import tasks
from kernelzero_jax.sandbox import Job, SandboxConfig, SandboxPool

_KB = flags.DEFINE_string("kernelbench_dir", None, "KernelBench problems (level1/, level2/).")
_CANDIDATES = flags.DEFINE_string("candidates_dir", "benchmarks/candidates", "Candidates root.")
_OUT = flags.DEFINE_string("out", "sandbox_gpu.json", "Where to write all results (JSON).")
_ONLY = flags.DEFINE_string("only", "", "Regex on candidate file names to run a subset.")
_PARALLEL = flags.DEFINE_integer("max_parallel", 12, "Concurrent judges (builds run in parallel).")
_DOBENCH = flags.DEFINE_bool("dobench", True, "Cross-check speedups with triton do_bench.")
_CHEATS = flags.DEFINE_bool("cheats", True, "Evaluate the cheating candidates too.")
_FAULTS = flags.DEFINE_bool("faults", True, "Evaluate the GPU fault candidates too.")

_HONEST_RE = re.compile(r"level(\d)_(\d+)_(cuda|triton)\.py$")

# Runs in a plain process (not the sandbox): times reference and candidate with do_bench on the
# same inputs, holding the sandbox's GPU lock so sandbox timings and these do not overlap.
_DOBENCH_SNIPPET = r"""
import json, sys, torch, triton.testing
from kernelzero_jax.sandbox import problem
from kernelzero_jax.sandbox.gpu_budget import gpu_lock
ref_src, cand_src = open(sys.argv[1]).read(), open(sys.argv[2]).read()
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.set_grad_enabled(False)
cand = problem.load_module(cand_src, "cand")            # builds the extension outside the lock
ref = problem.load_module(ref_src, "ref")
dev = torch.device("cuda")
with gpu_lock(0):
  m_ref = problem.make_model(ref.Model, ref.get_init_inputs, 42, dev)
  m_cand = problem.make_model(cand.ModelNew, ref.get_init_inputs, 42, dev)
  inputs = problem.make_inputs(ref.get_inputs, 7, dev)
  t_ref = triton.testing.do_bench(lambda: m_ref(*inputs), warmup=50, rep=500, return_mode="median")
  t_cand = triton.testing.do_bench(lambda: m_cand(*inputs), warmup=50, rep=500, return_mode="median")
  del m_ref, m_cand, inputs
  torch.cuda.empty_cache()  # before the next holder of the lock allocates
print(json.dumps({"ref_ms": t_ref, "cand_ms": t_cand}))
"""


def _header(source: str, key: str) -> str | None:
  m = re.search(rf"^#\s*{key}:\s*(\S+)", source, re.MULTILINE)
  return m.group(1) if m else None


def _dobench(ref_path: str, cand_path: str, ext_dir: str) -> dict:
  env = dict(os.environ, TORCH_EXTENSIONS_DIR=ext_dir, PYTHONPATH=os.getcwd())
  proc = subprocess.run([sys.executable, "-c", _DOBENCH_SNIPPET, ref_path, cand_path],
                        capture_output=True, text=True, env=env, timeout=900)
  if proc.returncode != 0:
    return {"error": proc.stderr.strip().splitlines()[-1:] or ["failed"]}
  return json.loads(proc.stdout.strip().splitlines()[-1])


def run() -> dict:
  kb_dir = _KB.value
  root = _CANDIDATES.value
  only = re.compile(_ONLY.value) if _ONLY.value else None
  honest, cheats = [], []
  for name in sorted(os.listdir(os.path.join(root, "honest"))):
    m = _HONEST_RE.search(name)
    if m and (only is None or only.search(name)):
      honest.append((name, int(m.group(1)), int(m.group(2)), m.group(3)))
  if _CHEATS.value:
    for name in sorted(os.listdir(os.path.join(root, "cheats"))):
      if name.endswith(".py") and (only is None or only.search(name)):
        src = open(os.path.join(root, "cheats", name)).read()
        prob, backend = _header(src, "problem"), _header(src, "backend")
        if prob and backend:
          lvl, pid = re.match(r"level(\d)/(\d+)_", prob).groups()
          cheats.append((name, int(lvl), int(pid), backend))

  jobs, meta = [], []
  for kind, items in (("honest", honest), ("cheat", cheats)):
    for name, lvl, pid, backend in items:
      task = tasks.load_task(lvl, pid, kb_dir)
      src = open(os.path.join(root, "honest" if kind == "honest" else "cheats", name)).read()
      jobs.append(Job(task.source, src, backend, name=name))
      meta.append({"kind": kind, "file": name, "problem": task.key, "backend": backend,
                   "reference_path": task.path})
  config = SandboxConfig(device="cuda", tolerance="kernelzero")
  pool = SandboxPool(config, max_parallel=_PARALLEL.value)
  # Faults run afterwards with short stage limits, followed by an honest candidate that must
  # still pass on the same GPU.
  fault_jobs, fault_meta = [], []
  fault_dir = os.path.join(root, "faults")
  if _FAULTS.value and os.path.isdir(fault_dir):
    for name in sorted(os.listdir(fault_dir)):
      if not name.endswith(".py") or (only is not None and not only.search(name)):
        continue
      src = open(os.path.join(fault_dir, name)).read()
      lvl, pid = re.match(r"level(\d)/(\d+)_", _header(src, "problem")).groups()
      task = tasks.load_task(int(lvl), int(pid), kb_dir)
      fault_jobs.append(Job(task.source, src, _header(src, "backend"), name=name))
      fault_meta.append({"kind": "fault", "file": name, "problem": task.key,
                         "backend": _header(src, "backend"), "expect": _header(src, "expect")})
    if fault_jobs and honest:
      name, lvl, pid, backend = honest[-1]
      task = tasks.load_task(lvl, pid, kb_dir)
      fault_jobs.append(Job(task.source, open(os.path.join(root, "honest", name)).read(), backend,
                            name=name))
      fault_meta.append({"kind": "after_faults", "file": name, "problem": task.key,
                         "backend": backend, "expect": "correct"})
  t0 = time.time()
  dobench_results = {}
  ext_dir = os.path.abspath("dobench_extensions")
  with concurrent.futures.ThreadPoolExecutor(4) as ex:
    futs = {}
    if _DOBENCH.value:
      for m in meta:
        if m["kind"] == "honest":
          futs[ex.submit(_dobench, m["reference_path"], os.path.join(root, "honest", m["file"]),
                         ext_dir)] = m["file"]
    progress_log = open(_OUT.value + ".partial.jsonl", "a")

    def log(i, job, verdict):
      progress_log.write(json.dumps({"file": job.name, **verdict.to_dict()}) + "\n")
      progress_log.flush()

    verdicts = pool.evaluate(jobs, progress=True, on_result=log)
    if fault_jobs:
      fault_config = SandboxConfig(device="cuda", tolerance="kernelzero", correctness_timeout_s=45,
                                   timing_timeout_s=120)
      verdicts += SandboxPool(fault_config, max_parallel=_PARALLEL.value).evaluate(
          fault_jobs, progress=True, on_result=log)
      meta += fault_meta
    for fut, name in futs.items():
      try:
        dobench_results[name] = fut.result()
      except Exception as e:  # pylint: disable=broad-except
        dobench_results[name] = {"error": [repr(e)]}
  wall = time.time() - t0

  rows = []
  for m, v in zip(meta, verdicts):
    row = dict(m, **v.to_dict())
    db = dobench_results.get(m["file"])
    if db and "ref_ms" in db:
      row["dobench_ref_ms"], row["dobench_cand_ms"] = db["ref_ms"], db["cand_ms"]
      row["dobench_speedup"] = db["ref_ms"] / db["cand_ms"]
      if v.speedup:
        row["speedup_ratio"] = v.speedup / row["dobench_speedup"]
    elif db:
      row["dobench_error"] = db.get("error")
    rows.append(row)

  print("\nHonest candidates (full KernelBench sizes)")
  print(f"{'file':24s} {'status':14s} {'build_s':>8s} {'corr_s':>7s} {'time_s':>7s} "
        f"{'ref_ms':>9s} {'cand_ms':>9s} {'speedup':>8s} {'dobench':>8s} {'ratio':>6s}")
  for r in rows:
    if r["kind"] != "honest":
      continue
    s = r["stage_seconds"]
    f = lambda x, p=3: "-" if x is None else f"{x:.{p}f}"
    print(f"{r['file']:24s} {r['status']:14s} {f(s.get('build'), 1):>8s} "
          f"{f(s.get('correctness'), 1):>7s} {f(s.get('timing'), 1):>7s} "
          f"{f(r['reference_ms']):>9s} {f(r['candidate_ms']):>9s} {f(r['speedup']):>8s} "
          f"{f(r.get('dobench_speedup')):>8s} {f(r.get('speedup_ratio'), 2):>6s}")
    if r["status"] != "correct":
      print("    ", "; ".join(r["reasons"])[:300])
  print("\nCheating candidates")
  for r in rows:
    if r["kind"] == "cheat":
      print(f"{r['file']:34s} {r['problem']:40s} {r['status']:14s} "
            f"{'; '.join(r['reasons'])[:110]}")
  print("\nFaults (then an honest candidate on the same GPU)")
  for r in rows:
    if r["kind"] in ("fault", "after_faults"):
      print(f"{r['file']:34s} expect {r['expect']:14s} got {r['status']:14s} "
            f"{'; '.join(r['reasons'])[:100]}")
  honest_rows = [r for r in rows if r["kind"] == "honest"]
  n_ok = sum(r["status"] == "correct" for r in honest_rows)
  ratios = [r["speedup_ratio"] for r in honest_rows if "speedup_ratio" in r]
  within = sum(abs(x - 1) <= 0.10 for x in ratios)
  n_cheat_pass = sum(r["correct"] for r in rows if r["kind"] == "cheat")
  summary = {"honest_correct": f"{n_ok}/{len(honest_rows)}",
             "speedup_within_10pct_of_dobench": f"{within}/{len(ratios)}",
             "cheats_passed": f"{n_cheat_pass}/{sum(r['kind'] == 'cheat' for r in rows)}",
             "faults_as_expected": f"{sum(r['status'] == r['expect'] for r in rows if r['kind'] in ('fault', 'after_faults'))}/{sum(r['kind'] in ('fault', 'after_faults') for r in rows)}",
             "wall_s": round(wall, 1)}
  print("\nsummary:", json.dumps(summary))
  with open(_OUT.value, "w") as f:
    json.dump({"summary": summary, "rows": rows}, f, indent=1)
  return summary


def main(argv):
  del argv
  run()


if __name__ == "__main__":
  app.run(main)
