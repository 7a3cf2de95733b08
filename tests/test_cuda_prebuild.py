"""A CUDA candidate's extensions built beside its worker's start-up (sandbox/cuda_prebuild.py).

On this CPU machine the candidates build a C++ extension with torch's own load_inline (a CUDA
build needs torch's CUDA libraries to link), in real prebuilder and worker processes: the
hand-over, the batons a dead prebuilder leaves, and a worker whose build finds nothing to do.
The lite-only first choice and the worker's fallback are checked with a recorded load_inline.
"""

from __future__ import annotations

import contextlib
import glob
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

import pytest
from torch.utils import cpp_extension

from kernelzero_jax.sandbox import channel
from kernelzero_jax.sandbox import cuda_prebuild
from kernelzero_jax.sandbox import fast_build
from kernelzero_jax.sandbox import judge as judge_lib
from kernelzero_jax.sandbox import judge_worker
from kernelzero_jax.sandbox import light_names
from kernelzero_jax.sandbox import worker as worker_lib
from kernelzero_jax.sandbox import worker_handle
from test_fast_build import FakeLoadInline
from test_lite_build import KERNEL

REFERENCE = textwrap.dedent("""
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, x):
            return x * 7

    def get_inputs():
        return [torch.rand(16)]

    def get_init_inputs():
        return []
    """)

# Only pybind11, no torch header: a C++ build of a few seconds.
CANDIDATE = textwrap.dedent('''
    import torch
    import torch.nn as nn
    from torch.utils.cpp_extension import load_inline

    SOURCE = """
    #include <pybind11/pybind11.h>
    int seven() { return 7; }
    PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("seven", &seven); }
    """
    ext = load_inline("kz_prebuild_test", cpp_sources=[SOURCE], no_implicit_headers=True)

    class ModelNew(nn.Module):
        def forward(self, x):
            return x * ext.seven()
    ''')

# In the prebuilder only (its source file lies in its own folder): takes the build's baton, as a
# build cut short leaves it, and hangs.
HANGS_HOLDING_THE_BATON = CANDIDATE.replace("ext = load_inline", textwrap.dedent("""\
    import os, time
    if os.path.basename(os.path.dirname(os.path.abspath(__file__))) == "prebuild":
        os.makedirs("torch_extensions/kz_prebuild_test", exist_ok=True)
        open("torch_extensions/kz_prebuild_test/lock", "w").close()
        time.sleep(600)
    ext = load_inline"""))
assert HANGS_HOLDING_THE_BATON != CANDIDATE


def _spec(workdir: str, candidate: str) -> dict:
  return {"workdir": workdir, "device": "cpu", "backend": "cuda", "candidate_source": candidate,
          "reference_source": REFERENCE, "memory_limit_gb": 8.0, "gpu_memory_fraction": 0.9,
          "own_kernel_names": []}


@contextlib.contextmanager
def _started(candidate: str, **worker_spec):
  """A worker waiting for its go and its prebuilder, as judge._start_worker starts them."""
  workdir = tempfile.mkdtemp(prefix="kz_prebuild_test_")
  spec = _spec(workdir, candidate)
  # (Neither kills every process this test process started, as a judge's would: the test
  # process's own helpers, multiprocessing's resource tracker say, would die with them.)
  worker = worker_handle.WorkerHandle(dict(spec, await_go=True, **worker_spec), 8.0,
                                      kill_descendants=False)
  prebuilder = worker_handle.WorkerHandle(dict(spec, role=worker_lib.PREBUILD, device="meta"), 8.0,
                                      kill_descendants=False)
  try:
    yield workdir, worker, prebuilder
  finally:
    for handle in (worker, prebuilder):
      handle.kill()


def _library(workdir: str) -> str:
  (path,) = glob.glob(os.path.join(workdir, cuda_prebuild.EXTENSIONS_DIR, "kz_prebuild_test",
                                   "*.so"))
  return path


def _builds_and_runs_its_extension(worker) -> None:
  assert worker.wait(240, "build")["ok"]
  _runs_its_extension(worker)


def _runs_its_extension(worker) -> None:
  for cmd in ({"cmd": "construct", "seed": 0}, {"cmd": "init", "seed": 0}):
    assert worker.request(cmd, 60, "init")["ok"]
  reply = worker.request({"cmd": "run", "seed": 3, "profile": False}, 60, "correctness")
  (out,), (x,) = reply["outputs"], reply["inputs_after"]
  assert reply["ok"] and bool((out == 7 * x).all())  # (a torch op: a violation, not our matter)


@pytest.mark.timeout(300)
def test_the_worker_finds_what_its_prebuilder_built_and_builds_nothing(monkeypatch):
  monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0+PTX")  # what a GPU would give (arch_list)
  # The judge's thread hands over (here a judge of this process, with these two processes).
  judge = judge_lib.Judge({"backend": "cuda", "config": {"device": "cpu"},
                           "candidate_source": CANDIDATE, "reference_source": REFERENCE})
  shutil.rmtree(judge.workdir)
  with _started(CANDIDATE) as (workdir, worker, prebuilder):
    judge.workdir, judge.worker, judge.prebuilder = workdir, worker, prebuilder
    judge._start_hand_over()  # pylint: disable=protected-access
    judge._hand_over_thread.join(240)  # pylint: disable=protected-access
    assert judge.go_sent_at is not None
    summary = judge.verdict.evidence["cuda_prebuild"]
    assert summary["ok"] and summary["seconds"] > 0 and summary["batons_removed"] == 0
    assert not prebuilder.proc.is_alive()
    library = _library(workdir)
    before = os.stat(library).st_mtime_ns
    built = worker.wait(240, "build")
    assert built["ok"], built
    assert os.stat(library).st_mtime_ns == before  # ninja found it up to date
    assert "await_go" in built["startup_seconds"]
    _runs_its_extension(worker)


@pytest.mark.timeout(300)
def test_a_prebuilder_that_hangs_holding_the_baton_costs_its_wait_and_nothing_else(monkeypatch):
  monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0+PTX")
  with _started(HANGS_HOLDING_THE_BATON) as (workdir, worker, prebuilder):
    summary = cuda_prebuild.hand_over(prebuilder, worker, workdir, 20)
    assert not summary["ok"] and "prebuild: no answer within 20 s" in summary["error"]
    assert summary["batons_removed"] == 1 and 20 <= summary["waited_s"] < 40
    # Without the baton's removal the worker's load_inline would wait for it forever.
    _builds_and_runs_its_extension(worker)


@pytest.mark.timeout(300)
def test_without_a_known_gpu_architecture_the_prebuilder_builds_nothing(monkeypatch):
  """This machine's torch has no CUDA architectures: the prebuilder says so, the worker builds."""
  monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
  assert cuda_prebuild.arch_list(90) is None
  with _started(CANDIDATE) as (workdir, worker, prebuilder):
    summary = cuda_prebuild.hand_over(prebuilder, worker, workdir, 240)
    assert summary == {"ok": False, "error": "no single GPU architecture found through NVML",
                       "batons_removed": 0, "lite_failed": False,
                       "waited_s": summary["waited_s"]}
    assert glob.glob(os.path.join(workdir, cuda_prebuild.EXTENSIONS_DIR, "*")) == []
    _builds_and_runs_its_extension(worker)


@pytest.mark.timeout(300)
def test_where_the_prebuilders_lite_build_failed_the_worker_starts_from_the_fallback():
  with _started(CANDIDATE, fast_build=True, lite_object="/nonexistent/rt.o") as (
      _, worker, prebuilder):
    prebuilder.kill()
    channel.send(worker.conn, {"cmd": "go", "skip_lite": True}, by_value=True)
    built = worker.wait(240, "build")
    assert built["ok"], built
    assert built["build_log"] == [
        "lite build failed in the prebuilder; building with torch's headers",
        "plain build (nothing to speed up)"]
    (step,) = built["build_steps"]  # the one load_inline call, timed
    assert step["step"] == "plain" and step["ok"] is True and step["seconds"] > 0


@pytest.mark.timeout(300)
def test_a_worker_whose_build_fails_says_how_it_built_and_for_how_long():
  broken = CANDIDATE.replace("int seven() { return 7; }", "int seven() { return kz_missing; }")
  with _started(broken, fast_build=True, lite_object="/nonexistent/rt.o") as (
      _, worker, prebuilder):
    prebuilder.kill()
    channel.send(worker.conn, {"cmd": "go", "skip_lite": True}, by_value=True)
    failed = worker.wait(240, "build")
  assert not failed["ok"] and failed["status"] == "compile_error"
  assert "kz_missing" in failed["error"] and failed["seconds"] > 0
  assert failed["build_log"] == [
      "lite build failed in the prebuilder; building with torch's headers",
      "plain build (nothing to speed up)"]
  (step,) = failed["build_steps"]
  assert step["step"] == "plain" and step["ok"] is False
  assert 0 < step["seconds"] <= failed["seconds"]


def test_the_judge_tells_the_worker_to_skip_only_a_lite_build_that_failed():
  class Prebuilder:
    def __init__(self, reply):
      self.reply, self.killed = reply, False

    def wait(self, timeout_s, stage):
      del timeout_s, stage
      return self.reply

    def kill(self):
      self.killed = True

  class Worker:
    def __init__(self):
      self.conn, self.other_end = multiprocessing.Pipe()

  failed = "lite build failed (RuntimeError: x); building with torch's headers"
  for reply, skip, skip_light in (
      ({"ok": False, "error": "e", "build_log": [failed]}, True, False),
      # its errors ones the light header cannot mend (light_names.py): no fast build either
      ({"ok": False, "error": "e", "build_log": [failed, light_names.CANNOT_HELP]}, True, True),
      ({"ok": False, "error": "prebuild: no lite build of this extension", "build_log": []},
       False, False),
      ({"ok": True, "seconds": 1.0, "build_log": ["lite build (...)"]}, False, False)):
    prebuilder, worker = Prebuilder(reply), Worker()
    summary = cuda_prebuild.hand_over(prebuilder, worker, tempfile.mkdtemp(), 1.0)
    assert prebuilder.killed and summary["ok"] is reply["ok"]
    assert summary.get("skip_light", False) is skip_light
    assert channel.recv(worker.other_end) == {"cmd": "go", "skip_lite": skip,
                                              "skip_light": skip_light}


def test_the_go_goes_to_the_worker_the_judge_names_once_the_prebuilder_is_done():
  class Prebuilder:
    def wait(self, timeout_s, stage):
      del timeout_s, stage
      return {"ok": False, "error": "e",
              "build_log": ["lite build failed (RuntimeError: x); building with torch's headers"]}

    def kill(self):
      pass

  class Worker:
    def __init__(self):
      self.conn, self.other_end = multiprocessing.Pipe()

  kept, new, asked = Worker(), Worker(), []
  summary = cuda_prebuild.hand_over(Prebuilder(), kept, tempfile.mkdtemp(), 1.0,
                                    worker_for=lambda s: asked.append(dict(s)) or new)
  assert [a["lite_failed"] for a in asked] == [True] and summary["lite_failed"] is True
  assert channel.recv(new.other_end) == {"cmd": "go", "skip_lite": True, "skip_light": False}
  assert not kept.other_end.poll(0)
  # none: the worker was killed after a failure meanwhile; nothing to tell
  summary = cuda_prebuild.hand_over(Prebuilder(), kept, tempfile.mkdtemp(), 1.0,
                                    worker_for=lambda s: None)
  assert summary["lite_failed"] is True and not kept.other_end.poll(0)


class _KeptWorker:
  """A kept worker as its judge sees it, waiting for its go: records its kill."""
  start_method, pid = "kept", 4242

  def __init__(self):
    self.killed = False

  def kill(self):
    self.killed = True


@pytest.mark.parametrize("lite_failed, serves, fresh, replaced", [
    (True, 3, True, True),
    (False, 3, True, False),  # built lite (or not lite at all): the kept worker builds
    (True, 1, True, False),  # a new worker already
    (True, 3, False, False),  # SandboxConfig.fresh_worker_for_fallback_builds off
])
def test_a_candidate_whose_lite_build_failed_gets_a_new_worker_instead_of_a_kept_one(
    lite_failed, serves, fresh, replaced, monkeypatch):
  """A kept worker's failure is judged again in a new worker (Judge.run), building it all
  again; a lite build that failed leaves the fallback build, which such candidates nearly always
  fail too: a new worker builds it, and its failure stands."""
  monkeypatch.setattr(judge_worker, "WorkerHandle", _Recorded)
  _Recorded.specs = []
  job = {"backend": "cuda", "config": {"device": "cuda", "fresh_worker_for_fallback_builds": fresh},
         "candidate_source": CANDIDATE, "reference_source": REFERENCE}
  judge = judge_lib.Judge(job)
  shutil.rmtree(judge.workdir, ignore_errors=True)
  kept = _KeptWorker()
  judge.worker, judge.worker_serves = kept, serves
  judge._worker_spec = {"await_go": True, "workdir": judge.workdir}  # pylint: disable=protected-access
  judge.verdict.evidence.update(worker_reuse={"served": serves - 1, "kept": True},
                                worker_start="kept", worker_pid=kept.pid)
  worker = judge._worker_for_the_build({"lite_failed": lite_failed})  # pylint: disable=protected-access
  ev = judge.verdict.evidence
  if not replaced:
    assert worker is kept and not kept.killed and _Recorded.specs == []
    assert "replaced" not in ev["worker_reuse"] and ev["worker_start"] == "kept"
    return
  assert kept.killed and judge.worker is worker and judge.worker_serves == 1
  assert _Recorded.specs == [({"await_go": True, "workdir": judge.workdir}, True)]
  assert ev["worker_reuse"]["replaced"] == {"served": 2,
                                            "why": "the lite build failed in the prebuilder"}
  assert ev["worker_start"] == "fork" and ev["worker_pid"] is None
  assert worker.messages is ev["messages"]
  judge.worker = None  # killed after a failure meanwhile: nothing to start
  assert judge._worker_for_the_build({"lite_failed": True}) is None  # pylint: disable=protected-access
  assert len(_Recorded.specs) == 1


def test_the_go_waits_for_the_judge_timing_the_reference():
  class Prebuilder:
    def wait(self, timeout_s, stage):
      del timeout_s, stage
      return {"ok": True, "seconds": 1.0, "build_log": []}

    def kill(self):
      pass

  class Worker:
    def __init__(self):
      self.conn, self.other_end = multiprocessing.Pipe()

  worker, entered, gate, seen = Worker(), threading.Event(), threading.Event(), []

  def before_go():
    seen.append(worker.other_end.poll(0))  # nothing sent yet
    entered.set()
    gate.wait()

  thread = threading.Thread(target=lambda: seen.append(cuda_prebuild.hand_over(
      Prebuilder(), worker, tempfile.mkdtemp(), 1.0, before_go)))
  thread.start()
  # Timed from the judge's start, not the thread's: the thread reaches before_go later.
  assert entered.wait(10)
  time.sleep(0.3)
  assert not worker.other_end.poll(0)  # the prebuilder is done; the judge is not
  gate.set()
  thread.join(10)
  assert seen[0] is False and seen[1]["waited_for_judge_s"] >= 0.3
  assert channel.recv(worker.other_end)["cmd"] == "go"


def test_a_prebuilder_tries_the_lite_build_alone():
  fake, log = FakeLoadInline(), []
  load = fast_build.fast_load_inline(fake, None, log.append, lite_object="/cache/rt.o",
                                     first_choice_only=True)
  assert load("ext", "int g();", KERNEL) == "module 1"
  fake = FakeLoadInline(failures=1)
  load = fast_build.fast_load_inline(fake, None, log.append, lite_object="/cache/rt.o",
                                     first_choice_only=True)
  with pytest.raises(RuntimeError, match="no lite build"):
    load("ext", "int g();", KERNEL)
  assert len(fake.calls) == 1 and log[-1].startswith("lite build failed")
  fake = FakeLoadInline()  # C++ alone: nothing lite to build, so nothing is built
  load = fast_build.fast_load_inline(fake, None, lite_object="/cache/rt.o", first_choice_only=True)
  with pytest.raises(RuntimeError, match="no lite build"):
    load("ext", "int g();")
  assert fake.calls == []


@pytest.mark.parametrize("capability, flags, expected", [
    (90, "-gencode compute=compute_80,code=sm_80 -gencode compute=compute_90,code=sm_90",
     "9.0+PTX"),
    (86, "sm_80 sm_86 sm_90", "8.6+PTX"),
    (100, "sm_80 sm_90", "9.0+PTX"),  # newer than this torch: clamped, as torch clamps
    (None, "sm_90", None),
    (90, "", None),  # a torch without CUDA
])
def test_the_architecture_list_is_torchs_for_one_device(capability, flags, expected,
                                                        monkeypatch):
  assert cuda_prebuild.arch_list(capability, flags) == expected
  if expected is None:
    return
  # torch's own flags for one visible device of this capability, against the list's.
  monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
  monkeypatch.setattr(cpp_extension.torch.cuda, "device_count", lambda: 1)
  monkeypatch.setattr(cpp_extension.torch.cuda, "get_device_capability",
                      lambda i: (capability // 10, capability % 10))
  monkeypatch.setattr(cpp_extension.torch.cuda, "get_arch_list",
                      lambda: [f"sm_{sm}" for sm in re.findall(r"sm_(\d+)", flags)])
  derived = cpp_extension._get_cuda_arch_flags()  # pylint: disable=protected-access
  monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", expected)
  assert cpp_extension._get_cuda_arch_flags() == derived  # pylint: disable=protected-access


def test_the_judge_keeps_a_bounded_summary_of_the_reply():
  reply = {"ok": True, "seconds": 2.5, "build_log": ["x" * 900] * 50, "error": "e" * 5000,
           "status": "correct", "outputs": [1]}
  kept = cuda_prebuild.sanitize(reply)
  assert set(kept) == {"ok", "seconds", "build_log", "error"}
  assert len(kept["build_log"]) == cuda_prebuild.REPLY_LIMITS["log_lines"]
  assert all(len(line) == cuda_prebuild.REPLY_LIMITS["line_chars"] for line in kept["build_log"])
  assert len(kept["error"]) == cuda_prebuild.REPLY_LIMITS["error_chars"]
  assert cuda_prebuild.sanitize("no") == {"ok": False, "error": "no reply"}
  assert cuda_prebuild.sanitize({"ok": 1, "seconds": float("nan")}) == {"ok": False}


def test_batons_go_and_a_build_cut_short_goes_whole(tmp_path):
  build = tmp_path / cuda_prebuild.EXTENSIONS_DIR / "ext"
  build.mkdir(parents=True)
  (build / "lock").write_text("")
  (build / "ext.so").write_text("")
  assert cuda_prebuild.clear_for_worker(str(tmp_path), built=True) == 1
  assert sorted(os.listdir(build)) == ["ext.so"]
  (build / "lock").write_text("")
  assert cuda_prebuild.clear_for_worker(str(tmp_path), built=False) == 1
  assert not (tmp_path / cuda_prebuild.EXTENSIONS_DIR).exists()
  assert cuda_prebuild.clear_for_worker(str(tmp_path), built=False) == 0


class _Recorded:
  """Stands in for worker_handle.WorkerHandle: records each process a judge would start."""
  specs: list = []
  start_method = "fork"
  pid = None

  def __init__(self, spec, memory_limit_gb, target=None, kill_descendants=True):
    del memory_limit_gb, target
    _Recorded.specs.append((spec, kill_descendants))
    self.conn, self.other_end = multiprocessing.Pipe()

  def wait(self, timeout_s, stage):
    raise worker_handle.StageFailure("runtime_error", f"{stage}: not started ({timeout_s})")

  def kill(self):
    pass


@pytest.mark.parametrize("backend, config, prebuilds, awaits_go, at_once", [
    ("cuda", {"device": "cuda"}, True, True, 4),
    ("cuda", {"device": "cuda", "build_nice": 0}, True, True, 4),
    ("cuda", {"device": "cuda", "build_nice": 7}, True, True, 1),  # alone: not niced
    ("cuda", {"device": "cuda", "cuda_prebuild": False}, False, False, 4),
    ("cuda", {"device": "cuda", "fast_build": False}, False, False, 4),  # the plain path stays
    # a Triton worker waits for its judge to measure the reference first (test_reference_first)
    ("triton", {"device": "cuda", "triton_precompile": False}, False, True, 4),
    ("triton", {"device": "cuda", "triton_precompile": False, "reference_first": False}, False,
     False, 4),
])
def test_judges_start_a_prebuilder_for_fast_cuda_builds_on_a_gpu(backend, config, prebuilds,
                                                                  awaits_go, at_once, monkeypatch):
  monkeypatch.setattr(judge_worker, "WorkerHandle", _Recorded)
  monkeypatch.setattr(fast_build, "ready_pch", lambda *_, **__: None)
  monkeypatch.setattr(judge_worker, "gpu_capability", lambda: 90)  # as NVML says on an H200
  _Recorded.specs = []
  job = {"backend": backend, "config": config, "candidate_source": CANDIDATE,
         "reference_source": REFERENCE, "judges_at_once": at_once}
  judge = judge_lib.Judge(job)
  judge.own_kernels = []
  judge._start_worker()  # pylint: disable=protected-access
  # a worker waiting for its go may get it only once the reference is timed (go_gate.py; the
  # hand-over opens the gate: nobody claimed it here)
  assert (judge.go_gate is not None) is awaits_go
  if judge._go_timer is not None:  # pylint: disable=protected-access
    judge._go_timer.cancel()  # pylint: disable=protected-access
  if judge._hand_over_thread is not None:  # pylint: disable=protected-access
    judge._hand_over_thread.join()  # pylint: disable=protected-access
    assert judge.verdict.evidence["cuda_prebuild"]["error"].startswith("prebuild: not started")
  (worker, _), *rest = _Recorded.specs
  assert bool(worker.get("await_go")) is awaits_go
  if prebuilds:
    ((prebuilder, kills_descendants),) = rest
    assert prebuilder == {**{k: v for k, v in worker.items() if k != "await_go"},
                          "role": worker_lib.PREBUILD, "device": "meta",
                          "nice": config.get("build_nice", 10) if at_once > 1 else 0,
                          "triton_capability": 90, "cuda_capability": 90}
    assert not kills_descendants  # killing it leaves the worker alone
  else:
    assert rest == []


@pytest.mark.parametrize("nice", [0, 7])
def test_a_process_that_only_builds_lowers_its_cpu_priority_by_its_specs_nice(nice, tmp_path):
  # What _setup_process leaves a prebuilder or precompiler with, in a process of its own (it
  # redirects the process's output into the work directory).
  code = ("import os, sys; from kernelzero_jax.sandbox import worker; "
          "before = os.nice(0); worker._setup_process(dict(workdir=sys.argv[1], device='meta', "
          f"memory_limit_gb=8.0, nice={nice})); print(before, os.nice(0))")
  subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, timeout=120)
  before, after = map(int, (tmp_path / "stdout.txt").read_text().split())
  assert after == min(before + nice, 19)


def test_the_throughput_benchmark_sums_up_the_prebuilders():
  # pylint: disable-next=import-outside-toplevel
  from benchmarks.sandbox_throughput import side_worker_summary
  rows = [{"evidence": {"cuda_prebuild": {"ok": True, "waited_s": 3.0}}},
          {"evidence": {"cuda_prebuild": {"ok": False, "waited_s": 1.0, "error": "e" * 300}}},
          {"evidence": {"cuda_prebuild": {"ok": True, "waited_s": 4.0}}},
          {"evidence": {}}, {}]
  prebuild_summary = lambda rows: side_worker_summary(rows, "cuda_prebuild", "built",
                                                     lambda p: p.get("ok") is True)
  assert prebuild_summary(rows) == {"started": 3, "built": 2, "median_waited_s": 3.0,
                                    "errors": ["e" * 100]}


def test_the_throughput_benchmark_sums_up_the_precompilers_steps():
  # pylint: disable-next=import-outside-toplevel
  from benchmarks.sandbox_throughput import side_worker_summary
  rows = [{"evidence": {"triton_precompile": {"kernels": ["k"], "waited_s": 0.5,
                                              "kernels_s": 0.4, "launchers_s": 0.01,
                                              "launchers_early": 1}}},
          {"evidence": {"triton_precompile": {"kernels": ["k", "j"], "waited_s": 0.1,
                                              "kernels_s": 0.8, "launchers_s": 0.3,
                                              "launchers_early": 2}}},
          {"evidence": {"triton_precompile": {"kernels": [], "error": "no GPU"}}}]
  assert side_worker_summary(rows, "triton_precompile", "with_kernels",
                             lambda p: bool(p.get("kernels"))) == {
      "started": 3, "with_kernels": 2, "median_waited_s": 0.3, "errors": ["no GPU"],
      "median_kernels_s": 0.6, "median_launchers_s": 0.155, "launchers_early": 3}
