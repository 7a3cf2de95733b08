"""Workers that serve several candidates (SandboxConfig.candidates_per_worker), on the CPU.

A judge process that serves several jobs (judge_host.py) keeps its worker after a correct
candidate, stopped, and gives it the next job where the worker finds nothing of the last
candidate left in itself (worker_state.py). Here: the order in which workers are kept, started
and killed over a sequence of jobs, what a kept worker looks like between jobs, each class of
leftover that ends a worker, the judges' own input seeds, and a failure in a kept worker judged
again in a new one.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import subprocess
import sys

import pytest

from kernelzero_jax.sandbox import Job
from kernelzero_jax.sandbox import SandboxConfig
from kernelzero_jax.sandbox import SandboxPool
from kernelzero_jax.sandbox import judge

REPO = pathlib.Path(__file__).parent.parent
CANDIDATES = pathlib.Path(__file__).parent / "candidates"
CONFIG = SandboxConfig(device="cpu", num_correct_trials=1, correctness_timeout_s=6.0,
                       build_timeout_s=60.0, jobs_per_judge_process=8, candidates_per_worker=4)
REFERENCE = (CANDIDATES / "references/scaled_relu.py").read_text()
HONEST = (CANDIDATES / "honest/scaled_relu.py").read_text()
# Correct, but it leaves torch's thread count changed in its worker.
LEAVES_THREADS = HONEST.replace("import triton.language as tl\n",
                                "import triton.language as tl\n\ntorch.set_num_threads(1)\n", 1)
WRONG = HONEST.replace("* scale + b,", "* scale + b + 1.0,", 1)
assert LEAVES_THREADS != HONEST and WRONG != HONEST


def _job(source: str, name: str) -> Job:
  return Job(REFERENCE, source, "triton", name)


def _script(code: str, timeout: float = 120) -> str:
  return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                        env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=timeout,
                        check=True).stdout


def test_a_worker_is_kept_after_correct_candidates_and_ended_by_leftovers_and_failures():
  jobs = [_job(HONEST, "a"), _job(HONEST, "b"), _job(LEAVES_THREADS, "threads"),
          _job(HONEST, "c"), _job(WRONG, "wrong"), _job(HONEST, "d")]
  with SandboxPool(CONFIG, max_parallel=1) as pool:
    out = pool.evaluate(jobs, once_per_candidate=False)
  assert [v.status for v in out] == ["correct"] * 4 + ["incorrect", "correct"], \
      [(v.status, v.reasons) for v in out]
  assert len({v.evidence["judge_process"]["pid"] for v in out}) == 1
  starts = [v.evidence["worker_start"] for v in out]
  # 1: forked by the judge; 2, 3: the same worker, kept; 4: the third candidate left torch's
  # thread count changed, so a new worker; 5: kept again, but it failed there, so judged again
  # in a worker of its own (whose start the verdict names); 6: nothing kept after a failure.
  assert starts == ["fork", "kept", "kept", "forkserver", "forkserver", "forkserver"], starts
  reuse = [v.evidence.get("worker_reuse") for v in out]
  assert reuse[0] is None and reuse[5] is None
  assert [r["served"] for r in reuse[1:4]] == [1, 2, 3]
  assert reuse[1]["kept"] and reuse[2]["kept"] and reuse[1]["drift"] == []
  assert not reuse[3]["kept"]
  assert any("torch's global settings changed (threads)" in d for d in reuse[3]["drift"])
  again = out[4].evidence["judged_again"]
  assert again["status"] == "incorrect" and again["worker_serves"] == 2
  assert "worker_reuse" not in out[4].evidence  # the second judgement's worker was new


def test_candidates_per_worker_1_keeps_no_worker_and_serves_the_same_verdicts():
  config = dataclasses.replace(CONFIG, candidates_per_worker=1)
  jobs = [_job(HONEST, "a"), _job(WRONG, "wrong"), _job(HONEST, "b")]
  with SandboxPool(config, max_parallel=1) as pool:
    out = pool.evaluate(jobs, once_per_candidate=False)
  assert [v.status for v in out] == ["correct", "incorrect", "correct"]
  assert [v.evidence["worker_start"] for v in out] == ["fork", "forkserver", "forkserver"]
  assert not any("worker_reuse" in v.evidence or "judged_again" in v.evidence for v in out)


def test_a_kept_worker_is_stopped_between_jobs_and_only_serves_its_own_kind():
  # In a process of its own: a judge that serves several jobs, run here in-process.
  out = _script(
      "import dataclasses, json, psutil\n"
      "from kernelzero_jax.sandbox import judge, worker_handle\n"
      "from tests import test_worker_reuse as t\n"
      "worker_handle.KEEP_WORKERS = True\n"
      "worker_handle.WORKER_START = 'fork'\n"
      "config = dataclasses.asdict(t.CONFIG)\n"
      "job = {'reference_source': t.REFERENCE, 'candidate_source': t.HONEST,\n"
      "       'backend': 'triton', 'config': config}\n"
      "first = judge.run_job(job)\n"
      "kept = worker_handle.PARKED['handle'].proc.pid\n"
      "status = psutil.Process(kept).status()\n"
      "other = dict(job, config=dict(config, memory_limit_gb=15.0))\n"
      "second = judge.run_job(other)\n"
      "print(json.dumps([first.status, status, psutil.pid_exists(kept) and \n"
      "                  psutil.Process(kept).status() != psutil.STATUS_ZOMBIE,\n"
      "                  second.status, second.evidence['worker_reuse'],\n"
      "                  first.reasons + second.reasons]))\n"
      "worker_handle.end_kept_worker()\n")
  import json  # pylint: disable=import-outside-toplevel
  first, status, alive, second, reuse, reasons = json.loads(out.strip().splitlines()[-1])
  assert (first, second) == ("correct", "correct"), reasons
  assert status == "stopped"
  assert not alive  # made for another memory limit: killed, not given the job
  assert reuse["kept"] is False and "another device, backend or build" in reuse["drift"][0]


def test_judges_draw_their_own_input_seeds_only_where_workers_are_kept():
  job = {"reference_source": REFERENCE, "candidate_source": HONEST, "backend": "triton"}
  shared = dataclasses.asdict(dataclasses.replace(CONFIG, candidates_per_worker=1, seed=3))
  assert {judge.Judge(dict(job, config=shared)).base_seed for _ in range(3)} == {3 * 1_000_003}
  kept = dataclasses.asdict(dataclasses.replace(CONFIG, seed=3))
  judges = [judge.Judge(dict(job, config=kept)) for _ in range(3)]
  seeds = [j.base_seed for j in judges]
  assert len(set(seeds)) == 3 and all(s > 3 * 1_000_003 for s in seeds)
  # Each verdict keeps its base, from which its inputs can be made again.
  assert [j.verdict.evidence["input_seed_base"] for j in judges] == seeds


def test_workers_serve_eight_candidates_on_a_gpu_and_one_on_the_cpu_unless_told():
  assert SandboxConfig(device="cuda").worker_candidates() == 8
  assert SandboxConfig(device="cpu").worker_candidates() == 1
  assert SandboxConfig(device="cuda", candidates_per_worker=1).worker_candidates() == 1
  assert SandboxConfig(device="cpu", candidates_per_worker=3).worker_candidates() == 3
  with pytest.raises(ValueError, match="candidates_per_worker must be >= 1"):
    SandboxConfig(candidates_per_worker=0)
  # A GPU judge by default draws its own seeds, as kept workers need.
  job = {"reference_source": REFERENCE, "candidate_source": HONEST, "backend": "triton",
         "config": dataclasses.asdict(SandboxConfig(device="cuda", seed=3))}
  assert judge.Judge(job).base_seed > 3 * 1_000_003


# Each leftover a candidate could leave in its worker, by class, and one that is not a leftover.
LEFTOVERS = {
    "nothing": ("", None),
    "a torch function replaced": ("torch.nn.functional.relu = lambda x: x", "replaced"),
    "a torch class attribute replaced": ("torch.Tensor.relu = lambda self: self", "replaced"),
    "a module swapped": ("import types; sys.modules['math'] = types.ModuleType('math')",
                         "sys.modules"),
    "an environment variable": ("os.environ['CUDA_LAUNCH_BLOCKING'] = '1'", "environment"),
    "a torch setting": ("torch.set_default_dtype(torch.float64)", "default_dtype"),
    "a trace hook": ("sys.setprofile(lambda *a: None)", "hooks"),
    "a signal handler": ("import signal; signal.signal(signal.SIGUSR1, lambda *a: None)",
                         "signal"),
    "a thread left running": ("import threading, time; threading.Thread(target=time.sleep, args=(30,),"
                        " daemon=True).start(); time.sleep(0.1)", "OS thread"),
    "an operator registered": ("lib = torch.library.Library('kz_leftover', 'DEF'); "
                               "lib.define('f(Tensor x) -> Tensor')", "dispatcher"),
    "the umask": ("os.umask(0o77)", "umask"),
}


@pytest.mark.parametrize("name", sorted(LEFTOVERS))
def test_each_class_of_leftover_is_found(name):
  code, expected = LEFTOVERS[name]
  out = _script(
      "import os, sys, torch\n"
      "from kernelzero_jax.sandbox import worker_state\n"
      "torch.ones(1 << 20).add_(1.0)\n"  # the CPU thread pool, as the worker starts it
      "pristine = worker_state.Pristine(torch, torch.device('cpu'))\n"
      "torch.nn.Linear(64, 64)(torch.randn(8, 64))  # harness-like work: no leftover\n"
      f"{code}\n"
      "print(repr(pristine.drift()))\n")
  drift = eval(out.strip().splitlines()[-1])  # pylint: disable=eval-used
  if expected is None:
    assert drift == []
  else:
    assert any(expected in d for d in drift), drift


def test_extensions_get_names_of_their_own_in_a_worker_that_serves_several():
  # A process that loaded an extension module gets that module back for a later extension of
  # the same name (seen on an H200: a kept worker ran the last candidate's kernel). So each
  # candidate's load_inline builds under its name plus the job's suffix, however it is called.
  from kernelzero_jax.sandbox import worker_build  # pylint: disable=import-outside-toplevel
  calls = []

  def load_inline(name, cpp_sources, cuda_sources=None, functions=None, verbose=False):
    calls.append((name, cpp_sources, cuda_sources, functions, verbose))
    return name

  renamed = worker_build._renamed(load_inline, "_kz1234")  # pylint: disable=protected-access
  assert renamed("ext", ["a"], functions=["f"]) == "ext_kz1234"
  assert renamed(name="other", cpp_sources=["b"], verbose=True) == "other_kz1234"
  assert calls == [("ext_kz1234", ["a"], None, ["f"], False),
                   ("other_kz1234", ["b"], None, None, True)]
  import inspect  # pylint: disable=import-outside-toplevel
  assert inspect.signature(renamed) == inspect.signature(load_inline)  # fast_build binds it


def test_a_judge_that_fails_beside_a_kept_worker_judges_its_candidate_again():
  # The judge's own failure (an exception, here planted in its checks) in a job that a kept
  # worker served: the candidate is judged again with a new worker, and that verdict stands.
  out = _script(
      "import dataclasses, json\n"
      "from kernelzero_jax.sandbox import judge, worker_handle\n"
      "from tests import test_worker_reuse as t\n"
      "worker_handle.KEEP_WORKERS = True\n"
      "worker_handle.WORKER_START = 'fork'\n"
      "checks = judge.Judge._checks\n"
      "def failing(self, base):\n"
      "  if self.worker_serves > 1:\n"
      "    raise MemoryError('planted')\n"
      "  return checks(self, base)\n"
      "judge.Judge._checks = failing\n"
      "job = {'reference_source': t.REFERENCE, 'candidate_source': t.HONEST,\n"
      "       'backend': 'triton', 'config': dataclasses.asdict(t.CONFIG)}\n"
      "first, second = judge.run_job(job), judge.run_job(job)\n"
      "print(json.dumps([first.status, second.status, second.evidence['worker_start'],\n"
      "                  second.evidence['judged_again']]))\n"
      "worker_handle.end_kept_worker()\n")
  import json  # pylint: disable=import-outside-toplevel
  first, second, start, again = json.loads(out.strip().splitlines()[-1])
  assert (first, second, start) == ("correct", "correct", "fork")
  assert again["status"] == "runtime_error" and again["worker_serves"] == 2
  assert isinstance(again["worker_pid"], int)  # the kept worker's (on a GPU, its holds too)
  assert again["reasons"] == ["judge failed: MemoryError: planted"]


@pytest.mark.parametrize("left_mib,starts", [(0, ["fork", "kept", "kept"]),
                                             (64, ["fork", "fork", "fork"])])
def test_a_worker_whose_gpu_memory_does_not_come_back_is_not_kept(left_mib, starts):
  # A worker's drop says what it still holds beyond its state before its first candidate (on a
  # GPU, torch's allocated bytes after freeing; planted here). Beyond
  # worker_state.GPU_BYTES_LEFT_OK, the judge kills it under the hold instead of keeping it:
  # parked, it would hold that memory where no check's budget counts it.
  out = _script(
      "import dataclasses, json\n"
      "from kernelzero_jax.sandbox import judge, worker, worker_handle\n"
      "from tests import test_worker_reuse as t\n"
      "worker_handle.KEEP_WORKERS = True\n"
      "worker_handle.WORKER_START = 'fork'\n"
      f"worker._Worker.release = lambda self: {{'ok': True, 'allocated_bytes': {left_mib} << 20}}\n"
      "job = {'reference_source': t.REFERENCE, 'candidate_source': t.HONEST,\n"
      "       'backend': 'triton', 'config': dataclasses.asdict(t.CONFIG)}\n"
      "verdicts = [judge.run_job(job) for _ in range(3)]\n"
      "print(json.dumps([[v.status, v.evidence['worker_start'],\n"
      "                   v.evidence.get('worker_drop_left_bytes')] for v in verdicts]))\n"
      "worker_handle.end_kept_worker()\n")
  import json  # pylint: disable=import-outside-toplevel
  verdicts = json.loads(out.strip().splitlines()[-1])
  assert [v[0] for v in verdicts] == ["correct"] * 3
  assert [v[1] for v in verdicts] == starts
  assert [v[2] for v in verdicts] == [left_mib << 20] * 3
