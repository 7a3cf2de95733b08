"""Judges that share a GPU (gpu_concurrency > 1) must not run it out of memory for each other.

The correctness checks of several judges can share a GPU; on full-size problems their tensors
together can fill it (measured on an H200: honest Triton matmuls failed with "CUDA out of memory"
at gpu_concurrency=4). Two defences: a check holds as many slots as its memory needs (its
problem's input and output sizes, read on the meta device), and a candidate that runs out of memory
on a shared GPU anyway is judged again with the GPU to itself, whose verdict counts. The judge
process is replaced by a recorder here (no GPU on this machine); the real judges' use of both
runs in the GPU benchmark (benchmarks/sandbox_throughput.py).
"""

from __future__ import annotations

import os

import pytest
import torch

from kernelzero_jax.sandbox import SandboxConfig
from kernelzero_jax.sandbox import evaluate as evaluate_lib
from kernelzero_jax.sandbox import gpu_budget
from kernelzero_jax.sandbox import judge as judge_lib
from kernelzero_jax.sandbox import problem
from kernelzero_jax.sandbox import verdict as V

GiB = 1 << 30


def test_input_bytes_reads_shapes_and_dtypes_without_memory():
  def get_inputs():  # 2 GiB of float32 and 1 GiB of int64, nested, with a non-tensor leaf
    return [torch.rand(1 << 15, 1 << 14), [torch.randint(0, 9, (1 << 27,)), 3.0]]
  assert problem.input_bytes(get_inputs) == 3 * GiB


@pytest.mark.parametrize("get_inputs", [
    lambda: [torch.rand(4, 4).sum().item()],       # reads a value: meta tensors have none
    lambda: [torch.rand(4, 4, device="cpu")],      # a device of its own
    lambda: [torch.rand(-1)],                      # fails on any device
], ids=["reads_a_value", "own_device", "raises"])
def test_input_bytes_is_unknown_when_meta_cannot_tell(get_inputs):
  assert problem.input_bytes(get_inputs) is None


def test_output_bytes_counts_the_forwards_outputs_or_its_largest_result_inside():
  class Matmul(torch.nn.Module):  # level 1 problem 7's shapes: 16 MiB in, 4 GiB out
    def forward(self, a, b):
      return torch.matmul(a, b)
  small_k = lambda: [torch.rand(1 << 15, 64), torch.rand(64, 1 << 15)]
  assert problem.input_bytes(small_k) == 16 << 20
  assert problem.output_bytes(Matmul, lambda: [], small_k) == 4 * GiB

  class ConvThenPool(torch.nn.Module):  # 64 MiB out of a 2 GiB intermediate
    def __init__(self, channels):
      super().__init__()
      self.conv = torch.nn.Conv2d(3, channels, 3, padding=1)
    def forward(self, x):
      return torch.nn.functional.avg_pool2d(self.conv(x), 4)
  image = lambda: [torch.rand(8, 3, 512, 512)]
  assert problem.output_bytes(ConvThenPool, lambda: [256], image) == 8 * 256 * 512 * 512 * 4

  class Views(torch.nn.Module):  # outputs together; a view holds its base, once
    def forward(self, x):
      y = x + 1
      return x * 2, y.view(-1)[:10], y[5:]
  assert problem.output_bytes(Views, lambda: [], lambda: [torch.rand(1 << 20)]) == 8 << 20


@pytest.mark.parametrize("model", [
    lambda: type("ReadsAValue", (torch.nn.Module,),
                 {"forward": lambda self, x: x * float(x.sum())}),
    lambda: type("RaisesInInit", (torch.nn.Module,),
                 {"__init__": lambda self: 1 / 0}),
], ids=["reads_a_value", "raises"])
def test_output_bytes_is_unknown_when_meta_cannot_tell(model):
  assert problem.output_bytes(model(), lambda: [], lambda: [torch.rand(4)]) is None


def test_a_check_counts_three_input_sets_and_two_of_what_the_forward_makes():
  assert gpu_budget.check_bytes(6 * GiB, 6 * GiB) == 30 * GiB  # elementwise: 5 input sets
  assert gpu_budget.check_bytes(16 << 20, 4 * GiB) == 8 * GiB + (48 << 20)
  assert gpu_budget.check_bytes(8 * GiB, 8 << 10) == 24 * GiB + (16 << 10)  # a reduction
  assert gpu_budget.check_bytes(GiB) == 5 * GiB  # what it makes unknown: as much as it takes


def test_checks_share_the_gpu_only_when_they_fit_at_once():
  # 80% of the GPU's memory for the checks together.
  gpu = 100 * GiB
  assert gpu_budget.checks_fit(20 * GiB, 4, gpu, judges=0)          # 80 GiB
  assert not gpu_budget.checks_fit(20 * GiB + 1, 4, gpu, judges=0)
  assert gpu_budget.checks_fit(80 * GiB, 1, gpu, judges=0)
  assert not gpu_budget.checks_fit(80 * GiB, 1, gpu)  # beside its own processes
  elementwise = gpu_budget.check_bytes(6 * GiB, 6 * GiB)  # level 1, 19_ReLU
  # four at once ran out of an H200's memory
  assert not gpu_budget.checks_fit(elementwise, 4, 140 * GiB)
  assert gpu_budget.checks_fit(elementwise, 3, 140 * GiB)
  # Every judge on the GPU holds its and its worker's CUDA contexts, whatever it is doing.
  room = gpu_budget.CHECK_MEMORY_SHARE * gpu - 10 * gpu_budget.JUDGE_GPU_BYTES
  assert gpu_budget.checks_fit(int(room) // 4, 4, gpu, judges=10)
  assert not gpu_budget.checks_fit(int(room) // 4 + 1, 4, gpu, judges=10)
  assert not gpu_budget.checks_fit(elementwise, 3, 140 * GiB, judges=24)


def test_a_check_too_large_to_share_with_all_holds_as_many_slots_as_its_memory_needs():
  # Each slot stands for a quarter of the room checks_fit counts (80% of the GPU, less every
  # judge's processes): 79.2 GiB of an H200-sized 140 GiB beside 24 judges, 19.8 GiB a slot.
  h200, judges = 140 * GiB, 24
  width = lambda check, slots=4: gpu_budget.check_width(check, slots, h200, judges)
  assert width(gpu_budget.check_bytes(GiB, GiB)) == 1  # 5 GiB a check
  assert width(gpu_budget.check_bytes(6 * GiB, 6 * GiB)) == 2  # the elementwise problems: 30 GiB
  assert width(gpu_budget.check_bytes(8 * GiB, 8 * GiB)) == 3  # level 1 problem 38: 40 GiB
  assert width(gpu_budget.check_bytes(8 * GiB, 8 << 10)) == 2  # level 1 problem 47: 24 GiB
  assert width(gpu_budget.check_bytes(16 << 20, 4 * GiB)) == 1  # level 1 problem 7: 8 GiB
  assert width(60 * GiB) == 4  # > 3 slots: alone
  assert width(500 * GiB) == 4
  assert gpu_budget.check_width(1, 4, 10 * gpu_budget.JUDGE_GPU_BYTES, judges=20) == 4  # no room
  assert width(30 * GiB, slots=1) == 1  # the one slot: the GPU alone
  # One slot exactly when checks_fit says `slots` of them fit; otherwise the fewest slots whose
  # share of the room holds one check, or all of them.
  room = gpu_budget.CHECK_MEMORY_SHARE * h200 - judges * gpu_budget.JUDGE_GPU_BYTES
  for check in range(0, 200 * GiB, 5 * GiB // 3):
    for slots in (1, 2, 3, 4, 8):
      w = width(check, slots)
      assert 1 <= w <= slots
      if slots > 1:  # (one slot: every check holds the GPU alone)
        assert (w == 1) == gpu_budget.checks_fit(check, slots, h200, judges)
      if w > 1:
        assert check > (w - 1) * room / slots
      if w < slots:
        assert check <= w * room / slots


def test_a_judge_keeps_its_memory_between_holds_only_when_every_judge_could():
  # Beside 4 slots' checks, each of the 24 judges of a pool on an H200-sized GPU keeping one
  # check's memory outside the slots: 28 checks in 74.5 GiB, 2.66 GiB a check.
  h200, judges = 140 * GiB, 24
  room = gpu_budget.CHECK_MEMORY_SHARE * h200 - judges * gpu_budget.JUDGE_GPU_BYTES
  largest = int(room // (4 + judges))
  assert 2.6 * GiB < largest < 2.7 * GiB
  assert gpu_budget.memory_kept_fits(largest, 4, h200, judges)
  assert not gpu_budget.memory_kept_fits(largest + 1, 4, h200, judges)
  kept = lambda inputs, outputs: gpu_budget.memory_kept_fits(
      gpu_budget.check_bytes(inputs, outputs), 4, h200, judges)
  # KernelBench's level-2 GEMMs (32 MiB in, 8 MiB out) keep theirs; the 6 GiB elementwise
  # problems do not, nor a 16 MiB matmul input that makes 4 GiB (level 1 problem 7), nor a check
  # of one slot's share, which fits beside the other slots alone.
  assert kept(32 << 20, 8 << 20)
  assert not kept(6 * GiB, 6 * GiB)
  assert not kept(16 << 20, 4 * GiB)
  assert gpu_budget.check_width(gpu_budget.check_bytes(GiB, GiB), 4, h200, judges) == 1
  assert not kept(GiB, GiB)
  # Fewer judges leave each more.
  assert gpu_budget.memory_kept_fits(gpu_budget.check_bytes(GiB, GiB), 4, h200, judges=4)


SHARED = SandboxConfig(device="cuda", gpu_concurrency=4)
OOM_REASONS = {
    "torch": "judge failed: OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB.",
    "driver": "judge failed: AcceleratorError: CUDA error: out of memory",
    "worker": "correctness: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1 GiB",
    "cublas": "correctness: RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED",
}


def _verdict(status: str, reason: str = "") -> V.Verdict:
  return V.Verdict(status=status, backend="triton", device="cuda",
                   reasons=[reason] if reason else [])


@pytest.mark.parametrize("kind", sorted(OOM_REASONS))
def test_an_oom_on_a_shared_gpu_is_not_final(kind):
  assert evaluate_lib.shared_gpu_oom(_verdict(V.RUNTIME_ERROR, OOM_REASONS[kind]), SHARED)


@pytest.mark.parametrize("config, verdict", [
    # one slot: the judge already had the GPU to itself, so the failure is the candidate's
    (SandboxConfig(device="cuda", gpu_concurrency=1),
     _verdict(V.RUNTIME_ERROR, OOM_REASONS["torch"])),
    (SandboxConfig(device="cpu", gpu_concurrency=4), _verdict(V.RUNTIME_ERROR, "out of memory")),
    (SHARED, _verdict(V.RUNTIME_ERROR, "correctness: IndexError: index 9 is out of bounds")),
    (SHARED, _verdict(V.INCORRECT, "max abs error 3.1 at [0, 2]")),
    (SHARED, _verdict(V.TIMEOUT, "the evaluation exceeded 600 s; out of memory")),
    (SHARED, _verdict(V.CORRECT)),
], ids=["one_slot", "cpu", "other_error", "incorrect", "timeout", "correct"])
def test_other_verdicts_are_final(config, verdict):
  assert not evaluate_lib.shared_gpu_oom(verdict, config)


class _Recorder:
  """Stands in for the judge process: returns the given verdicts in turn, records the jobs."""

  def __init__(self, *verdicts: V.Verdict):
    self.verdicts = list(verdicts)
    self.jobs: list[dict] = []

  def __call__(self, job, config, launcher):
    del config, launcher
    self.jobs.append(job)
    return self.verdicts.pop(0).to_dict(), "", False


def test_the_candidate_is_judged_again_alone_and_that_verdict_counts(monkeypatch):
  first = _verdict(V.RUNTIME_ERROR, OOM_REASONS["torch"])
  # (itself the judging again of a kept worker's failure, in the same judge process)
  kept_workers_failure = {"status": V.INCORRECT, "gpu_holds": [[0.2, 0.5, "shared"]],
                          "worker_pid": 5}
  first.evidence.update(gpu_holds=[[1.0, 2.0, "shared"]], worker_pid=7,
                        judge_process={"pid": 6, "job": 2}, ops=["mm"],
                        judged_again=kept_workers_failure)
  judge = _Recorder(first, _verdict(V.CORRECT))
  monkeypatch.setattr(evaluate_lib, "run_judge", judge)
  verdict = evaluate_lib.evaluate_candidate("ref", "cand", "triton", SHARED, facts_path="f.json")
  assert verdict.status == V.CORRECT
  assert verdict.evidence["shared_gpu_oom"] == [OOM_REASONS["torch"]]
  # where and when the failed attempt ran (benchmarks/gpu_steps.py places its OOM by them)
  assert verdict.evidence["shared_gpu_oom_attempt"] == {
      "gpu_holds": [[1.0, 2.0, "shared"]], "worker_pid": 7, "judge_process": {"pid": 6, "job": 2},
      "judged_again": kept_workers_failure}
  assert [job.get("exclusive_gpu") for job in judge.jobs] == [None, True]
  # The second judgement is the same job otherwise (same GPU, facts file, sources).
  assert {**judge.jobs[0], "exclusive_gpu": True} == judge.jobs[1]


@pytest.mark.parametrize("max_parallel, gpus, judges", [(24, (0,), 24), (16, (0, 1), 8),
                                                         (5, (0, 1), 3)])
def test_the_pool_tells_each_judge_how_many_judges_share_its_gpu(monkeypatch, max_parallel,
                                                                 gpus, judges):
  judge = _Recorder(_verdict(V.CORRECT))
  monkeypatch.setattr(evaluate_lib, "run_judge", judge)
  pool = evaluate_lib.SandboxPool(SHARED, max_parallel=max_parallel, gpu_indices=gpus,
                                  launcher="subprocess")
  pool.evaluate([evaluate_lib.Job("ref", "cand", "triton")])
  assert judge.jobs[0]["judges_on_gpu"] == judges


@pytest.mark.parametrize("candidates, judges_at_once", [(1, 1), (3, 3), (9, 4)])
def test_the_pool_tells_each_judge_how_many_judges_run_at_once(monkeypatch, candidates,
                                                                judges_at_once):
  # at most max_parallel (4), and no more than the batch has candidates
  judge = _Recorder(*[_verdict(V.CORRECT) for _ in range(candidates)])
  monkeypatch.setattr(evaluate_lib, "run_judge", judge)
  pool = evaluate_lib.SandboxPool(SHARED, max_parallel=4, gpu_indices=(0, 1),
                                  launcher="subprocess")
  pool.evaluate([evaluate_lib.Job("ref", f"cand{i}", "triton") for i in range(candidates)])
  assert [job["judges_at_once"] for job in judge.jobs] == [judges_at_once] * candidates


def test_the_judges_with_room_are_the_most_that_leave_checks_any():
  # 80% of 79.1 GiB (an H100's) is 63.28 GiB: 40 judges' 62.5 GiB leave 0.78, 41 none.
  assert gpu_budget.judges_with_room(int(79.1 * GiB)) == 40
  assert gpu_budget.judges_with_room(int(139.8 * GiB)) == 71
  assert gpu_budget.judges_with_room(10 * gpu_budget.JUDGE_GPU_BYTES) == 7  # 8 fill the share
  assert gpu_budget.judges_with_room(GiB) == 0
  for gpu in (int(79.1 * GiB), 10 * gpu_budget.JUDGE_GPU_BYTES, 3 * GiB):
    most = gpu_budget.judges_with_room(gpu)
    assert gpu_budget.check_width(1, 4, gpu, judges=most + 1) == 4  # no room: alone
    assert most == 0 or gpu_budget.check_width(1, 4, gpu, judges=most) == 1


def _fake_nvidia_smi(tmp_path, monkeypatch, script: str) -> None:
  """An nvidia-smi on PATH that runs `script` (sh) with the arguments it was given."""
  path = tmp_path / "nvidia-smi"
  path.write_text("#!/bin/sh\n" + script + "\n")
  path.chmod(0o755)
  monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")


def test_the_smallest_gpu_is_read_from_nvidia_smi_for_the_visible_gpus(tmp_path, monkeypatch):
  # The fake prints one line per GPU, in MiB; given -i, only those GPUs' lines.
  _fake_nvidia_smi(tmp_path, monkeypatch, """
case "$*" in
  *"--query-gpu=memory.total --format=csv,noheader,nounits -i 1,2") printf '143771\\n81559\\n' ;;
  *"--query-gpu=memory.total --format=csv,noheader,nounits") printf '143771\\n143771\\n' ;;
  *) exit 3 ;;
esac""")
  monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
  assert gpu_budget.smallest_gpu_bytes() == 143771 * 2**20
  monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,2")
  assert gpu_budget.smallest_gpu_bytes() == 81559 * 2**20
  monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")  # the fake fails on other arguments
  assert gpu_budget.smallest_gpu_bytes() is None
  monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU at all
  assert gpu_budget.smallest_gpu_bytes() is None


@pytest.mark.parametrize("script", ["echo 'No devices were found'", "exit 9", ":"])
def test_no_gpu_memory_where_nvidia_smi_tells_none(tmp_path, monkeypatch, script):
  _fake_nvidia_smi(tmp_path, monkeypatch, script)
  monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
  assert gpu_budget.smallest_gpu_bytes() is None


def test_no_gpu_memory_without_nvidia_smi(monkeypatch, tmp_path):
  monkeypatch.setenv("PATH", str(tmp_path))
  assert gpu_budget.smallest_gpu_bytes() is None


@pytest.mark.parametrize("max_parallel, gpus, device, warned", [
    (24, (0,), "cuda", True), (20, (0,), "cuda", False), (42, (0, 1), "cuda", True),
    (40, (0, 1), "cuda", False), (64, (0,), "cpu", False)])
def test_the_pool_warns_once_where_its_judges_leave_checks_no_room(
    monkeypatch, caplog, max_parallel, gpus, device, warned):
  # A 40 GiB GPU: 20 judges' processes (31.25 GiB) leave checks 0.75 of its 32 GiB share.
  read = []
  monkeypatch.setattr(gpu_budget, "smallest_gpu_bytes", lambda: read.append(1) or 40 * GiB)
  monkeypatch.setattr(evaluate_lib, "run_judge", _Recorder(*[_verdict(V.CORRECT)] * 2))
  pool = evaluate_lib.SandboxPool(SandboxConfig(device=device, gpu_concurrency=4),
                                  max_parallel=max_parallel, gpu_indices=gpus,
                                  launcher="subprocess")
  with caplog.at_level("WARNING"):
    pool.evaluate([evaluate_lib.Job("ref", "cand", "triton")])
    pool.evaluate([evaluate_lib.Job("ref", "cand2", "triton")])
  warnings = [r.getMessage() for r in caplog.records if "no room" in r.getMessage()]
  assert len(warnings) == int(warned) and len(read) == int(device == "cuda")
  if warned:
    assert warnings[0].startswith(f"{-(-max_parallel // len(gpus))} sandbox judges per GPU")
    assert warnings[0].endswith(f"At most 20 per GPU leave room: max_parallel={20 * len(gpus)}.")


def test_an_oom_with_the_gpu_alone_is_the_candidates_failure(monkeypatch):
  judge = _Recorder(_verdict(V.RUNTIME_ERROR, OOM_REASONS["worker"]),
                    _verdict(V.RUNTIME_ERROR, OOM_REASONS["driver"]))
  monkeypatch.setattr(evaluate_lib, "run_judge", judge)
  verdict = evaluate_lib.evaluate_candidate("ref", "cand", "triton", SHARED)
  assert verdict.status == V.RUNTIME_ERROR and verdict.reasons == [OOM_REASONS["driver"]]
  assert len(judge.jobs) == 2  # judged again once, not until it passes


@pytest.mark.parametrize("first", [_verdict(V.INCORRECT, "max abs error 3.1"),
                                   _verdict(V.CORRECT)])
def test_other_verdicts_are_judged_once(monkeypatch, first):
  judge = _Recorder(first)
  monkeypatch.setattr(evaluate_lib, "run_judge", judge)
  assert evaluate_lib.evaluate_candidate("ref", "cand", "triton", SHARED).status == first.status
  assert len(judge.jobs) == 1


def test_a_worker_gives_back_its_last_tensors_on_release_and_goes_on():
  """The command a judge sends before it waits for the GPU alone (judge._release_gpu_memory):
  a real worker, started as a judge starts it, on the CPU, answers it and still runs the
  candidate afterwards."""
  import pathlib  # pylint: disable=import-outside-toplevel
  import shutil  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import static_checks  # pylint: disable=import-outside-toplevel
  examples = pathlib.Path(evaluate_lib.__file__).parents[1] / "examples"
  candidate = (examples / "scaled_relu_triton.py").read_text()
  judge = judge_lib.Judge({
      "backend": "triton", "config": SandboxConfig(device="cpu").to_dict(),
      "candidate_source": candidate,
      "reference_source": (examples / "scaled_relu_reference.py").read_text()})
  judge.own_kernels = static_checks.check_candidate(candidate, "triton").triton_kernel_names
  judge._start_worker()  # pylint: disable=protected-access
  worker = judge.worker
  try:
    assert worker.wait(120, "build")["ok"]
    assert worker.request({"cmd": "init", "seed": 42}, 60, "init")["ok"]
    first = worker.request({"cmd": "run", "seed": 1, "profile": False}, 60, "correctness")
    outputs = [o.clone() for o in first["outputs"]]
    released = worker.request({"cmd": "release"}, 60, "release")
    # (beside the worker's own account of its time: WorkerHandle._account)
    assert {k: v for k, v in released.items() if k not in ("spent_s", "last_send_s")} == {
        "ok": True}
    assert worker.messages is not None and worker.messages["release"]["n"] == 1
    again = worker.request({"cmd": "run", "seed": 1, "profile": False}, 60, "correctness")
    assert again["ok"] and not again["violations"]
    assert all(torch.equal(a, b) for a, b in zip(again["outputs"], outputs))
  finally:
    worker.kill_descendants = False  # (a judge's would kill this test process's helpers too)
    worker.kill()
    shutil.rmtree(judge.workdir, ignore_errors=True)


def _judge_of(source: str, judges: int = 24, **config):
  """The parts of a Judge that its memory model reads (no GPU here: an H200's memory size)."""
  import types  # pylint: disable=import-outside-toplevel
  stub = types.SimpleNamespace(
      problem=problem, ref_mod=problem.load_module(source, "kz_memory_model_ref"),
      job={"judges_on_gpu": judges},
      cfg=SandboxConfig(device="cuda", gpu_concurrency=4, **config), _weights_place=None,
      verdict=V.Verdict(status=V.RUNTIME_ERROR, backend="cuda"),
      torch=types.SimpleNamespace(cuda=types.SimpleNamespace(
          get_device_properties=lambda device: types.SimpleNamespace(total_memory=140 * GiB))),
      device=torch.device("cuda", 0))
  stub._memory_on_gpu = judge_lib.Judge._memory_on_gpu.func(stub)  # pylint: disable=protected-access
  return stub


MODULE = ("import torch\nclass Model(torch.nn.Module):\n  def forward(self, a, b):\n"
          "    return {forward}\ndef get_inputs():\n  return [{inputs}]\n"
          "def get_init_inputs():\n  return []\n")


def test_a_judge_counts_what_its_reference_makes_in_its_checks_memory():
  # Level 1 problem 7's shapes: 16 MiB of inputs, a 4 GiB output. Counted in input sets it
  # passed for 80 MiB a check and kept its memory between holds, outside every slot.
  matmul = _judge_of(MODULE.format(forward="torch.matmul(a, b)",
                                   inputs="torch.rand(1 << 15, 64), torch.rand(64, 1 << 15)"))
  sizes = matmul._memory_on_gpu[0]  # pylint: disable=protected-access
  assert sizes == {"input_bytes": 16 << 20, "output_bytes": 4 * GiB,
                   "check_bytes": 8 * GiB + (48 << 20), "weight_bytes": 0}
  assert judge_lib.Judge._check_width(matmul, 4) == 1  # pylint: disable=protected-access
  assert not judge_lib.Judge._keeps_memory(matmul, 4)  # pylint: disable=protected-access
  # 6 GiB elementwise: two of the four slots, and the evidence says why.
  relu = _judge_of(MODULE.format(forward="torch.relu(a) + b",
                                 inputs="torch.rand(3 << 29), torch.rand(1)"))
  assert judge_lib.Judge._check_width(relu, 4) == 2  # pylint: disable=protected-access
  assert relu.verdict.evidence["check_width"] == {
      "input_bytes": 6 * GiB + 4, "output_bytes": 6 * GiB, "check_bytes": 30 * GiB + 12,
      "weight_bytes": 0, "slots": 4, "width": 2, "gpu_bytes": 140 * GiB, "judges_on_gpu": 24}


def test_weights_count_each_storage_once_on_the_meta_device():
  class Tied(torch.nn.Module):
    def __init__(self, n):
      super().__init__()
      self.encode = torch.nn.Linear(n, n, bias=False)
      self.decode = torch.nn.Linear(n, n, bias=False)
      self.decode.weight = self.encode.weight  # one storage for both
      self.norm = torch.nn.BatchNorm1d(n)  # buffers count too

  n = 1 << 15  # 4 GiB a matrix: nothing is allocated
  assert problem.weight_bytes(Tied, lambda: [n]) == n * n * 4 + 4 * n * 4 + 8
  assert problem.weight_bytes(lambda: torch.nn.ReLU(), lambda: []) == 0

  class OnTheCpu(torch.nn.Module):
    def __init__(self):
      super().__init__()
      self.register_buffer("table", torch.ones(4, device="cpu"))
  assert problem.weight_bytes(OnTheCpu, lambda: []) is None
  assert problem.weight_bytes(lambda n: 1 / 0, lambda: [1]) is None


def test_weights_stay_on_the_gpu_between_holds_only_when_every_judge_could_keep_them():
  gpu = 140 * GiB
  # level-2 problem 59: a 32768 x 32768 Linear, 4 GiB, twice per judge (reference and candidate)
  assert not gpu_budget.weights_kept_fit(4 * GiB, gpu, judges=24)
  assert gpu_budget.weights_kept_fit(4 * GiB, gpu, judges=1)  # a candidate alone
  assert not gpu_budget.weights_kept_fit(1 * GiB, gpu, judges=24)  # problems 66 and 68
  assert gpu_budget.weights_kept_fit(256 << 20, gpu, judges=24)  # 8192 x 8192 GEMMs
  # exactly at the bound: 24 judges x 2 x W = 15% of the GPU
  bound = int(0.15 * gpu) // 48
  assert gpu_budget.weights_kept_fit(bound, gpu, judges=24)
  assert not gpu_budget.weights_kept_fit(bound + 1, gpu, judges=24)
  # another share (SandboxConfig.weights_kept_share) moves the bound with it
  assert gpu_budget.weights_kept_fit(2 * bound, gpu, judges=24, share=0.3)
  assert not gpu_budget.weights_kept_fit(2 * bound + 2, gpu, judges=24, share=0.3)
  narrower = int(0.1 * gpu) // 48
  assert gpu_budget.weights_kept_fit(narrower, gpu, judges=24, share=0.1)
  assert not gpu_budget.weights_kept_fit(narrower + 1, gpu, judges=24, share=0.1)


LINEAR = ("import torch\nclass Model(torch.nn.Module):\n  def __init__(self, n):\n"
          "    super().__init__()\n    self.matmul = torch.nn.Linear(n, n)\n"
          "  def forward(self, x):\n    return self.matmul(x)\n"
          "def get_inputs():\n  return [torch.rand(128, {n})]\n"
          "def get_init_inputs():\n  return [{n}]\n")


def _apart(stub) -> bool:
  return judge_lib.Judge._weights_apart.func(stub)  # pylint: disable=protected-access


def test_without_the_ledger_a_judge_of_large_weights_keeps_them_off_the_gpu_between_holds():
  large = _judge_of(LINEAR.format(n=1 << 15), weights_ledger=False)  # level-2 problem 59's
  assert _apart(large)
  assert large.verdict.evidence["weights_apart"] == {
      "weight_bytes": 4 * GiB + (128 << 10), "gpu_bytes": 140 * GiB, "judges_on_gpu": 24}
  alone = _judge_of(LINEAR.format(n=1 << 15), judges=1, weights_ledger=False)
  assert not _apart(alone) and "weights_apart" not in alone.verdict.evidence
  small = _judge_of(LINEAR.format(n=1 << 13), weights_ledger=False)
  assert not _apart(small)
  on_the_cpu = _judge_of(LINEAR.format(n=1 << 15), weights_ledger=False)
  on_the_cpu.device = torch.device("cpu")
  assert not _apart(on_the_cpu)


def test_judges_keep_weights_on_the_gpu_while_those_kept_now_fit_its_share(monkeypatch,
                                                                             tmp_path):
  """gpu_budget.weights_kept: 15% of a 140 GiB GPU (21 GiB) holds two judges of problem 59
  (twice 4 GiB each), not three; a fourth keeps them once the first has let go."""
  import tempfile  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
  first, second = (_judge_of(LINEAR.format(n=1 << 15)) for _ in range(2))
  for kept in (first, second):
    assert not _apart(kept) and kept._weights_place is not None  # pylint: disable=protected-access
  third = _judge_of(LINEAR.format(n=1 << 15))
  assert _apart(third) and third._weights_place is None  # pylint: disable=protected-access
  assert third.verdict.evidence["weights_apart"] == {
      "weight_bytes": 4 * GiB + (128 << 10), "gpu_bytes": 140 * GiB,
      "kept_by_others_bytes": 4 * (4 * GiB + (128 << 10))}
  first._weights_place.close()  # pylint: disable=protected-access
  fourth = _judge_of(LINEAR.format(n=1 << 15))
  assert not _apart(fourth)
  for kept in (second, fourth):
    kept._weights_place.close()  # pylint: disable=protected-access
  # 24 judges of an 8192 x 8192 GEMM (256 MiB) all keep theirs (12 GiB of 21)
  gemms = [_judge_of(LINEAR.format(n=1 << 13)) for _ in range(24)]
  assert not any(_apart(j) for j in gemms)
  for j in gemms:
    j._weights_place.close()  # pylint: disable=protected-access
  on_the_cpu = _judge_of(LINEAR.format(n=1 << 15))
  on_the_cpu.device = torch.device("cpu")
  assert not _apart(on_the_cpu) and on_the_cpu._weights_place is None  # pylint: disable=protected-access


def test_the_default_weights_share_keeps_problem_59_beside_the_gemms_that_filled_0_1(
    monkeypatch, tmp_path):
  """SandboxConfig.weights_kept_share: on an H200 in a batch of 259, problem 59's judges found
  7.5-11.5 GiB kept by others (GEMMs of 256 MiB, 512 MiB a judge) of the 14 GiB that the former
  default of 0.1 gave, and ran their evaluations alone; with 0.15 of 140 GiB (21 GiB), 22 GEMM
  judges (11 GiB) and one of problem 59 (8 GiB) all keep theirs, and a second of problem 59 does
  not. The ledger counts what each place claimed, whatever share its holder was given."""
  import tempfile  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
  gemms = [_judge_of(LINEAR.format(n=1 << 13)) for _ in range(22)]
  assert not any(_apart(j) for j in gemms)
  narrower = _judge_of(LINEAR.format(n=1 << 15), weights_kept_share=0.1)
  assert _apart(narrower)
  assert narrower.verdict.evidence["weights_apart"]["kept_by_others_bytes"] == 22 * 2 * (
      (1 << 28) + (1 << 15))
  wider = _judge_of(LINEAR.format(n=1 << 15))
  assert not _apart(wider) and wider._weights_place is not None  # pylint: disable=protected-access
  second = _judge_of(LINEAR.format(n=1 << 15))
  assert _apart(second)
  for j in gemms + [wider]:
    j._weights_place.close()  # pylint: disable=protected-access
  # without the ledger the share bounds every judge's: 24 judges x 2 x 549 MiB (a 12000-wide
  # Linear) fit 0.2 of 140 GiB but not 0.15
  assert _apart(_judge_of(LINEAR.format(n=12000), weights_ledger=False))
  assert not _apart(_judge_of(LINEAR.format(n=12000), weights_ledger=False,
                              weights_kept_share=0.2))


def test_the_weights_share_leaves_the_checks_their_share():
  assert SandboxConfig().weights_kept_share == gpu_budget.WEIGHTS_KEPT_SHARE == 0.15
  assert SandboxConfig(weights_kept_share=0.2).weights_kept_share == 0.2  # all that checks leave
  for bad in (0, -0.1, 0.21, 1.0):
    with pytest.raises(ValueError, match="weights_kept_share"):
      SandboxConfig(weights_kept_share=bad)


def test_the_weights_ledger_counts_live_places_only(tmp_path):
  """A place is held by its holder's lock: a holder gone (its file left, unlocked) is not
  counted, and its file goes; places of another GPU are another ledger's."""
  share = int(gpu_budget.WEIGHTS_KEPT_SHARE * 100 * GiB)
  with gpu_budget.weights_kept(0, share // 4, 100 * GiB, str(tmp_path)) as (kept, others):
    assert kept and others == 0
    with gpu_budget.weights_kept(0, share // 4, 100 * GiB, str(tmp_path)) as (kept, others):
      assert kept and others == share // 2
      with gpu_budget.weights_kept(0, 1, 100 * GiB, str(tmp_path)) as (kept, others):
        assert not kept and others == share
      with gpu_budget.weights_kept(1, share // 2, 100 * GiB, str(tmp_path)) as (kept, others):
        assert kept and others == 0  # GPU 1
  ledger = tmp_path / "kernelzero_sandbox_gpu0.weights"
  assert sorted(p.name for p in ledger.iterdir()) == ["ledger.lock"]  # both given back
  (ledger / "12345.dead.place").write_text(str(share))  # a holder killed before it let go
  with gpu_budget.weights_kept(0, share // 2, 100 * GiB, str(tmp_path)) as (kept, others):
    assert kept and others == 0
  assert not (ledger / "12345.dead.place").exists()


def test_judges_of_large_weights_take_the_hosts_memory_a_few_at_a_time(monkeypatch, tmp_path):
  """host_memory_hold: 3 copies of 4 GiB in half of a 128 GiB host make 5 slots; of a 24 GiB
  host, 1, and the second judge then waits (here: finds none free)."""
  import tempfile  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
  with gpu_budget.host_memory_hold(4 * GiB, 128 * GiB) as slots:
    assert slots == 5
  with gpu_budget.host_memory_hold(4 * GiB, 24 * GiB) as slots:
    assert slots == 1
    with gpu_budget.host_memory_hold(4 * GiB, 24 * GiB, wait=False) as second:
      assert second == 0
  with gpu_budget.host_memory_hold(4 * GiB, 24 * GiB, wait=False) as again:
    assert again == 1  # given back when the first one ended
  with gpu_budget.host_memory_hold(4 * GiB, 4 * GiB) as slots:
    assert slots == 1  # never none


def test_a_judge_of_large_weights_holds_a_host_memory_slot_until_it_lets_go(monkeypatch,
                                                                            tmp_path):
  import tempfile  # pylint: disable=import-outside-toplevel
  import psutil  # pylint: disable=import-outside-toplevel
  import types  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
  monkeypatch.setattr(psutil, "virtual_memory", lambda: types.SimpleNamespace(total=24 * GiB))
  large = _judge_of(LINEAR.format(n=1 << 15), weights_ledger=False)
  assert _apart(large)
  large._host_memory = None  # pylint: disable=protected-access
  judge_lib.Judge._take_host_memory(large)  # pylint: disable=protected-access
  assert large.verdict.evidence["weights_apart"]["host_slots"] == 1
  assert large.verdict.evidence["weights_apart"]["host_wait_s"] >= 0
  with gpu_budget.host_memory_hold(4 * GiB, 24 * GiB, wait=False) as other:
    assert other == 0  # the one slot is this judge's
  large._host_memory.close()  # pylint: disable=protected-access
  with gpu_budget.host_memory_hold(4 * GiB, 24 * GiB, wait=False) as other:
    assert other == 1


def test_a_judge_gives_its_weights_place_back_after_its_reference_memory():
  import types  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import judge_gpu  # pylint: disable=import-outside-toplevel
  import contextlib  # pylint: disable=import-outside-toplevel
  order = []
  place = contextlib.ExitStack()
  place.callback(lambda: order.append("place"))
  stub = types.SimpleNamespace(
      _weights_place=place, ref_model="on the gpu", second_reference="on the cpu",
      torch=types.SimpleNamespace(cuda=types.SimpleNamespace(
          empty_cache=lambda: order.append(("empty_cache", stub.ref_model)))))
  judge_gpu.GpuSteps._give_weights_place_back(stub)  # pylint: disable=protected-access
  assert order == [("empty_cache", None), "place"] and stub._weights_place is None  # pylint: disable=protected-access
  judge_gpu.GpuSteps._give_weights_place_back(stub)  # pylint: disable=protected-access
  assert len(order) == 2  # once
