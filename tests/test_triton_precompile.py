"""The Triton precompiler (sandbox/triton_precompile.py): a worker on the meta device that
compiles a candidate's kernels for a GPU into the cache its worker reads.

This machine has no GPU, but Triton compiles for one anyway (GPUTarget("cuda", 90, 32)): the
tests run the precompiler as the judge starts it (a worker process of its own, with the guard)
and look at the cubins it leaves, then check that a launch with real tensors, from the worker's
file path, finds every one of them in the cache.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from kernelzero_jax.sandbox import judge as judge_lib
from kernelzero_jax.sandbox import judge_worker
from kernelzero_jax.sandbox import triton_precompile
from kernelzero_jax.sandbox import worker as worker_lib
from kernelzero_jax.sandbox import worker_handle

REFERENCE = textwrap.dedent("""
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.scale = scale

        def forward(self, x, y):
            return (x + y) * self.scale

    def get_inputs():
        return [torch.randn(1000), torch.randn(1000)]

    def get_init_inputs():
        return [2.0]
    """)

# Written for the GPU: a hard-coded device, .cuda(), a weight made in __init__.
CANDIDATE = textwrap.dedent("""
    import torch
    import torch.nn as nn
    import triton
    import triton.language as tl

    @triton.jit
    def add_scale_kernel(x_ptr, y_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, (x + y) * scale, mask=mask)

    class ModelNew(nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.scale = scale
            self.register_buffer("unused", torch.zeros(4, device="cuda"))

        def forward(self, x, y):
            x, y = x.cuda(), y.to("cuda")
            out = torch.empty(x.shape, device="cuda", dtype=x.dtype)
            n = x.numel()
            add_scale_kernel[(triton.cdiv(n, 256),)](x, y, out, n, self.scale, BLOCK=256)
            return out
    """)

AUTOTUNED = CANDIDATE.replace("@triton.jit", textwrap.dedent("""\
    @triton.autotune(configs=[triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 512})],
                     key=["n"])
    @triton.jit""")).replace(", BLOCK=256)", ")").replace("triton.cdiv(n, 256)",
                                                         "triton.cdiv(n, 128)")

# Compiles its kernel, then does what the meta device cannot (a value read back).
FAILS_AFTER_LAUNCH = CANDIDATE.replace("        return out\n",
                                       "        return out * float(out.sum().item())\n")

HANGS = CANDIDATE.replace("        n = x.numel()\n", "        while True:\n            pass\n")
assert CANDIDATE != FAILS_AFTER_LAUNCH and CANDIDATE != HANGS and CANDIDATE != AUTOTUNED


def _spec(workdir: str, candidate: str, capability: int | None = 90) -> dict:
  return {"workdir": workdir, "device": "meta", "role": worker_lib.PRECOMPILE,
          "backend": "triton", "candidate_source": candidate, "reference_source": REFERENCE,
          "memory_limit_gb": 8.0, "gpu_memory_fraction": 0.9,
          "own_kernel_names": ["add_scale_kernel"], "triton_capability": capability}


def _precompile(candidate: str, timeout_s: float = 240.0, capability: int | None = 90):
  workdir = tempfile.mkdtemp(prefix="kz_precompile_test_")
  handle = worker_handle.WorkerHandle(_spec(workdir, candidate, capability), 8.0,
                                      kill_descendants=False)  # (this process's helpers live)
  try:
    return handle.wait(timeout_s, "precompile"), workdir
  finally:
    handle.kill()


def _cubins(workdir: str) -> list[str]:
  return sorted(glob.glob(os.path.join(workdir, "triton_cache", "*", "*.cubin")))


def test_the_precompiler_compiles_a_gpu_candidates_kernel_for_the_gpu_on_no_gpu():
  reply, workdir = _precompile(CANDIDATE)
  assert reply["ok"], reply
  assert reply["kernels"] == ["add_scale_kernel"]
  # No libcuda on this machine: the driver's utilities and the launchers are left to the worker.
  assert reply["error"] is None or "forward" not in reply["error"], reply
  cubins = _cubins(workdir)
  assert len(cubins) == 1
  meta = json.load(open(cubins[0].replace(".cubin", ".json")))
  assert meta["target"]["arch"] == 90 and meta["target"]["backend"] == "cuda"
  # Its own copy of the source and its own output files: nothing of the worker's is touched.
  assert os.path.exists(os.path.join(workdir, worker_lib.PRECOMPILE, "candidate.py"))
  assert not os.path.exists(os.path.join(workdir, "candidate.py"))
  assert os.path.exists(os.path.join(workdir, "precompile_stderr.txt"))
  assert not os.path.exists(os.path.join(workdir, "stderr.txt"))


def test_a_launch_from_the_workers_file_with_real_tensors_finds_every_kernel_in_the_cache():
  reply, workdir = _precompile(CANDIDATE)
  assert reply["ok"] and reply["kernels"], reply
  cache = os.path.join(workdir, "triton_cache")
  before = sorted(os.listdir(cache))
  # What the worker does at its first check, less the launch: the candidate loaded from its
  # own path, real tensors, the same compile (on the CPU, the driver fixed to the same GPU).
  script = textwrap.dedent(f"""
      import os, sys, torch
      from kernelzero_jax.sandbox import problem, triton_precompile
      from triton.runtime import driver
      driver.set_active(triton_precompile.compile_only_driver(90))
      module = problem.load_module({CANDIDATE!r}, "kz_candidate", {workdir!r} + "/candidate.py")
      compiled = []
      with triton_precompile._compile_only_launches(compiled):
        x, y = torch.randn(1000), torch.randn(1000)
        out = torch.empty_like(x)
        module.add_scale_kernel[(4,)](x, y, out, x.numel(), 2.0, BLOCK=256)
      print(len(compiled))
      """)
  env = dict(os.environ, TRITON_CACHE_DIR=cache)
  env.pop("TRITON_INTERPRET", None)
  out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                       timeout=240, check=False)
  assert out.returncode == 0, out.stderr[-2000:]
  assert out.stdout.split()[-1] == "1"
  assert sorted(os.listdir(cache)) == before  # a hit: nothing new compiled


def test_an_autotuned_kernel_compiles_every_config():
  reply, workdir = _precompile(AUTOTUNED)
  assert reply["ok"] and "forward" not in (reply["error"] or ""), reply
  assert reply["kernels"] == ["add_scale_kernel"]
  assert len(_cubins(workdir)) == 2


def test_a_forward_that_fails_on_meta_keeps_what_it_compiled_and_says_why():
  reply, workdir = _precompile(FAILS_AFTER_LAUNCH)
  assert reply["ok"]
  assert reply["kernels"] == ["add_scale_kernel"] and len(_cubins(workdir)) == 1
  assert "forward on the meta device" in reply["error"]


def test_without_a_known_gpu_the_precompiler_says_so_and_compiles_nothing(monkeypatch):
  monkeypatch.setattr(triton_precompile, "nvml_capability", lambda: None)
  assert triton_precompile.nvml_capability() is None
  reply, workdir = _precompile(CANDIDATE, capability=None)  # its own process: NVML, no GPU here
  assert not reply["ok"] and "compute capability" in reply["error"]
  assert _cubins(workdir) == []


def _await_beside_a_worker(candidate: str) -> judge_lib.Judge:
  """A judge's wait for its precompiler, with a stand-in for the candidate's worker (another
  child of the judge, which is this process here)."""
  job = {"backend": "triton", "config": {"device": "cpu"}, "candidate_source": candidate,
         "reference_source": REFERENCE}
  judge = judge_lib.Judge(job)
  worker = subprocess.Popen(["sleep", "300"])  # pylint: disable=consider-using-with
  try:
    judge.worker_started = time.perf_counter()
    judge.precompiler = worker_handle.WorkerHandle(_spec(judge.workdir, candidate), 8.0,
                                               kill_descendants=False)
    judge._await_precompile()  # pylint: disable=protected-access
    assert not judge.precompiler.proc.is_alive()
    with pytest.raises(subprocess.TimeoutExpired):  # the worker lives on
      worker.wait(timeout=1.0)
  finally:
    judge.precompiler.kill()
    worker.kill()
    worker.wait()
  assert judge.verdict.status == judge_lib.V.RUNTIME_ERROR  # untouched: the judge's default
  assert judge.verdict.reasons == []
  return judge


def test_the_judge_records_what_its_precompiler_compiled_and_leaves_the_worker_alone():
  evidence = _await_beside_a_worker(CANDIDATE).verdict.evidence["triton_precompile"]
  assert evidence["kernels"] == ["add_scale_kernel"] and evidence["seconds"] > 0
  assert evidence["waited_s"] >= 0


def test_a_hanging_precompiler_costs_the_judge_its_wait_and_nothing_else(monkeypatch):
  monkeypatch.setattr(triton_precompile, "MAX_WAIT_S", 20.0)
  evidence = _await_beside_a_worker(HANGS).verdict.evidence["triton_precompile"]
  assert "precompile: no answer within 20 s" in evidence["error"]
  assert 20.0 <= evidence["waited_s"] < 40.0


def test_the_judge_keeps_only_a_bounded_summary_of_the_reply():
  reply = {"ok": True, "kernels": ["k" * 500] * 100, "launchers": float("nan"), "seconds": 1.5,
           "error": "e" * 5000, "status": "correct", "outputs": [1, 2]}
  kept = triton_precompile.sanitize(reply)
  assert set(kept) == {"kernels", "seconds", "error"}
  assert len(kept["kernels"]) == triton_precompile.REPLY_LIMITS["kernels"]
  assert all(len(k) == triton_precompile.REPLY_LIMITS["name_chars"] for k in kept["kernels"])
  assert len(kept["error"]) == triton_precompile.REPLY_LIMITS["error_chars"]
  assert triton_precompile.sanitize("not a dict") == {"error": "no reply"}
  assert triton_precompile.sanitize({"kernels": "abc", "launchers": True}) == {"kernels": []}


def test_judges_start_no_precompiler_off_the_gpu():
  """On the CPU the interpreter runs the kernels and nothing compiles: no precompiler."""
  # pylint: disable-next=import-outside-toplevel
  from kernelzero_jax.sandbox import SandboxConfig, evaluate_candidate
  on_the_cpu = (CANDIDATE.replace('device="cuda"', "device=x.device")
                .replace('torch.zeros(4, device=x.device)', "torch.zeros(4)")
                .replace('        x, y = x.cuda(), y.to("cuda")\n', ""))
  assert "cuda" not in on_the_cpu
  verdict = evaluate_candidate(REFERENCE, on_the_cpu, "triton",
                               SandboxConfig(device="cpu", timing=False))
  assert verdict.status == "correct", verdict.reasons
  assert "triton_precompile" not in verdict.evidence


def test_the_warm_server_of_a_gpu_hashes_triton_once_for_every_judge_it_forks():
  """Triton's cache key hashes its own library: the server does it before forking, so a
  worker's first compile, inside the GPU hold, does not."""
  script = textwrap.dedent("""
      import os
      from kernelzero_jax.sandbox import zygote
      zygote.preload("cuda")
      from triton.runtime import cache
      assert cache.triton_key.cache_info().currsize == 1
      pid = os.fork()
      if pid == 0:
        os._exit(0 if cache.triton_key.cache_info().currsize == 1 else 1)
      _, status = os.waitpid(pid, 0)
      import torch
      print(os.waitstatus_to_exitcode(status), torch.cuda.is_initialized())
      """)
  out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=240, check=False)
  assert out.returncode == 0, out.stderr[-2000:]
  assert out.stdout.split()[-2:] == ["0", "False"]


def test_a_precompiler_that_dies_is_reported_with_its_own_stderr():
  dies = CANDIDATE.replace("import triton\n", "import triton\nimport os, sys\n"
                           "sys.stderr.write('precompiler-marker\\n'); sys.stderr.flush()\n"
                           "os._exit(3)\n", 1)
  workdir = tempfile.mkdtemp(prefix="kz_precompile_test_")
  handle = worker_handle.WorkerHandle(_spec(workdir, dies), 8.0, kill_descendants=False)
  try:
    with pytest.raises(worker_handle.StageFailure, match="exit code 3.*precompiler-marker"):
      handle.wait(240.0, "precompile")
  finally:
    handle.kill()


_LAUNCHERS_SCRIPT = textwrap.dedent("""
    import json, threading, torch
    from triton import compiler
    from triton.backends.nvidia import driver as nvidia
    from triton.runtime import driver
    from kernelzero_jax.sandbox import problem, triton_precompile
    # Triton 3.6 builds a C launcher per signature (what the context looks for); later ones
    # build none.
    nvidia.make_launcher = lambda *a: None
    running = threading.Event()
    records, overlapped = [], []

    class Launcher:
      def __init__(self, src, metadata):
        running.set()
        records.append((src.signature, sorted(src.constants.values()), metadata.tensordesc_meta))

    true_compile = compiler.compile

    def compile_seeing_launchers(*args, **kwargs):
      overlapped.append(running.wait(4.0))
      running.clear()
      return true_compile(*args, **kwargs)

    compiler.compile = compile_seeing_launchers
    driver.set_active(triton_precompile.compile_only_driver(90))
    module = problem.load_module(CANDIDATE, "kz_candidate", WORKDIR + "/candidate.py")
    built = []
    with triton_precompile._launchers_beside_kernels(Launcher, built), \\
        triton_precompile._compile_only_launches([]):
      x = torch.randn(1000)
      for block in (256, 256, 128):
        module.add_scale_kernel[(4,)](x, x, x, x.numel(), 2.0, BLOCK=block)
    print(json.dumps({"records": records, "overlapped": overlapped,
                      "built": [f.done() and f.exception() is None for f in built],
                      "restored": compiler.compile is compile_seeing_launchers}))
    """)


def _launchers_built_beside(early: str) -> dict:
  """Launches CANDIDATE's kernel compile-only three times (twice with one signature, once with
  another constant) inside _launchers_beside_kernels, with a launcher class that records what
  it was given; each compile first waits (up to 4 s) for a launcher to be running."""
  workdir = tempfile.mkdtemp(prefix="kz_launchers_test_")
  script = (f"CANDIDATE = {CANDIDATE!r}\nWORKDIR = {workdir!r}\n" + _LAUNCHERS_SCRIPT)
  env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(workdir, "cache"),
             KZ_TRITON_EARLY_LAUNCHERS=early)
  env.pop("TRITON_INTERPRET", None)
  out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                       timeout=240, check=False)
  assert out.returncode == 0, out.stderr[-2000:]
  return json.loads(out.stdout.strip().splitlines()[-1])


def test_each_signatures_launcher_builds_beside_its_kernels_compile():
  out = _launchers_built_beside("1")
  # One per signature and constants (the second BLOCK=256 launch is a cache hit), each built
  # while its kernel's compile had not finished, none with tensor descriptors; Triton's
  # compile is put back on leaving.
  assert out["built"] == [True, True] and out["overlapped"] == [True, True], out
  assert [r[0]["x_ptr"] for r in out["records"]] == ["*fp32", "*fp32"]
  assert sorted(r[1][-1] for r in out["records"]) == [128, 256]
  assert [r[2] for r in out["records"]] == [None, None]
  assert out["restored"]


def test_early_launchers_can_be_turned_off():
  out = _launchers_built_beside("0")
  assert out["records"] == [] and out["built"] == [] and out["overlapped"] == [False, False]


def test_judges_read_the_gpus_capability_once_and_hand_it_to_their_builders(monkeypatch):
  # A worker forked from a forked worker server has no NVML of its own (forked_worker_server.py):
  # builders take the capability from their spec.
  calls = []
  monkeypatch.setattr(triton_precompile, "nvml_capability", lambda: calls.append(1) or 90)
  judge_worker.gpu_capability.cache_clear()
  try:
    assert judge_worker.gpu_capability() == 90 and judge_worker.gpu_capability() == 90
  finally:
    judge_worker.gpu_capability.cache_clear()  # not this test's NVML for later ones
  assert calls == [1]
