"""host_pinning: which tensors a model's move through page-locked memory copies, and what it
leaves as it was. Page-locked memory needs a CUDA build of torch, so `pin` is a stand-in here
that copies a tensor and records it (benchmarks/host_upload.py measures the real one on a GPU)."""

import pytest
import torch

from kernelzero_jax.sandbox import host_pinning


class Tied(torch.nn.Module):
  def __init__(self):
    super().__init__()
    self.first = torch.nn.Linear(64, 64)
    self.second = torch.nn.Linear(64, 64)
    self.second.weight = self.first.weight  # one parameter, in two submodules
    self.register_buffer("scale", torch.full((64,), 2.0))
    self.register_buffer("view_of_scale", self.scale[:8])  # shares the buffer's storage
    self.not_a_buffer = torch.ones(1000)  # a plain attribute: Module.to leaves it too


class RecordingPin:
  def __init__(self, fail_after: int | None = None):
    self.seen, self.fail_after = [], fail_after

  def __call__(self, tensor):
    if self.fail_after is not None and len(self.seen) >= self.fail_after:
      raise RuntimeError("page-locked memory ran out")
    self.seen.append(tensor.data_ptr())
    return tensor.clone()


def test_cpu_bytes_counts_each_storage_once():
  model = Tied()
  # weight 64x64 once (tied), two biases, the buffer's storage once (its view shares it)
  assert host_pinning.cpu_bytes(model) == 4 * (64 * 64 + 64 + 64 + 64)
  assert host_pinning.cpu_bytes(torch.nn.ReLU()) == 0


def test_pinning_copies_every_parameter_and_buffer_keeping_the_parameters():
  model = Tied()
  weight, before = model.first.weight, {k: v.clone() for k, v in model.state_dict().items()}
  old_ptrs = {k: v.data_ptr() for k, v in model.state_dict().items()}
  plain, nbytes = model.not_a_buffer.data_ptr(), host_pinning.cpu_bytes(model)
  pin = RecordingPin()
  evidence = host_pinning.pin_module(model, min_bytes=0, pin=pin)
  assert set(evidence) == {"bytes", "pin_s"} and evidence["bytes"] == nbytes
  assert model.first.weight is weight and model.second.weight is weight  # still tied
  after = model.state_dict()
  assert all(after[k].data_ptr() != old_ptrs[k] for k in after)  # each one a new copy
  assert all(torch.equal(after[k], before[k]) for k in after)
  assert model.not_a_buffer.data_ptr() == plain and plain not in pin.seen
  assert len(pin.seen) == 6  # first's weight and bias, second's weight again and bias, 2 buffers


def test_a_small_model_is_left_as_built():
  model = Tied()
  ptrs = {k: v.data_ptr() for k, v in model.state_dict().items()}
  pin = RecordingPin()
  assert host_pinning.pin_module(model, min_bytes=host_pinning.cpu_bytes(model) + 1, pin=pin) == {}
  assert pin.seen == [] and {k: v.data_ptr() for k, v in model.state_dict().items()} == ptrs


def test_a_failed_pin_says_why_and_leaves_the_values():
  model = Tied()
  before = {k: v.clone() for k, v in model.state_dict().items()}
  evidence = host_pinning.pin_module(model, min_bytes=0, pin=RecordingPin(fail_after=2))
  assert evidence["pin_failed"] == "RuntimeError: page-locked memory ran out"
  assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


@pytest.mark.parametrize("min_bytes", [0, host_pinning.MIN_BYTES])
def test_off_a_gpu_the_move_is_the_plain_one(min_bytes):
  model = Tied()
  ptrs = {k: v.data_ptr() for k, v in model.state_dict().items()}
  moved, evidence = host_pinning.to_device(torch, model, torch.device("cpu"), min_bytes)
  assert moved is model and evidence == {}
  assert {k: v.data_ptr() for k, v in model.state_dict().items()} == ptrs
