"""problem.seed_torch: torch.manual_seed's effect on the CPU's and CUDA's generators, without its
stack formatting for backends no sandbox process uses; and what guards it in a worker."""

import traceback

import pytest
import torch

from kernelzero_jax.sandbox import evidence
from kernelzero_jax.sandbox import problem
from kernelzero_jax.sandbox import static_checks


def _draws():
  return [torch.rand(5), torch.randn(3, 2), torch.randint(0, 100, (4,)), torch.rand(2).double()]


@pytest.mark.parametrize("seed", [0, 7, 2**40 + 3, -5])
def test_the_same_generator_state_and_draws_as_torch_manual_seed(seed):
  torch.manual_seed(seed)
  state, draws = torch.get_rng_state(), _draws()
  torch.manual_seed(seed + 1)  # something else in between
  _draws()
  problem.seed_torch(seed)
  assert torch.equal(torch.get_rng_state(), state)
  for a, b in zip(_draws(), draws):
    assert torch.equal(a, b)


def test_input_sets_and_models_are_as_before():
  get_inputs = lambda: [torch.rand(4, 8), torch.randn(8)]
  ours = problem.make_inputs(get_inputs, 11, torch.device("cpu"))
  torch.manual_seed(11)
  theirs = get_inputs()
  assert all(torch.equal(a, b) for a, b in zip(ours, theirs))
  model = problem.construct_model(torch.nn.Linear, lambda: [8, 3], 5)
  torch.manual_seed(5)
  expected = torch.nn.Linear(8, 3)
  assert torch.equal(model.weight, expected.weight) and torch.equal(model.bias, expected.bias)


def _stacks_formatted(monkeypatch, seed_fn) -> int:
  calls = []
  real = traceback.format_stack
  monkeypatch.setattr(traceback, "format_stack", lambda *a, **k: calls.append(1) or real(*a, **k))
  seed_fn(3)
  return len(calls)


def test_only_an_uninitialised_cuda_queues_the_seed_with_a_stack(monkeypatch):
  assert not torch.cuda.is_initialized()  # (the CPU test machine)
  everything = _stacks_formatted(monkeypatch, torch.manual_seed)
  assert everything >= 2  # CUDA's, and backends' no sandbox process initialises (XPU, MTIA)
  assert _stacks_formatted(monkeypatch, problem.seed_torch) == 1  # CUDA's alone


def test_the_old_way_on_request(monkeypatch):
  seeds = []
  monkeypatch.setattr(torch, "manual_seed", seeds.append)
  monkeypatch.setenv("KZ_SEED_ALL_BACKENDS", "1")
  problem.seed_torch(9)
  assert seeds == [9]


@pytest.mark.parametrize("name, replacement", [
    ("default_generator", torch.Generator()),
    ("manual_seed_all", lambda seed: None),
])
def test_a_worker_sees_its_seeding_replaced(monkeypatch, name, replacement):
  snapshot = evidence.IntegritySnapshot()
  assert snapshot.violations() == []
  owner = torch.cuda if name == "manual_seed_all" else torch
  monkeypatch.setattr(owner, name, replacement)
  dotted = f"{owner.__name__}.{name}"
  assert any(dotted in v for v in snapshot.violations()), snapshot.violations()


@pytest.mark.parametrize("expr", ["torch.cuda.manual_seed_all(0)", "torch.default_generator",
                                  "torch.cuda.default_generators[0]"])
def test_a_candidate_may_not_name_the_seeding(expr):
  source = f"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
  offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
  tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

class ModelNew(nn.Module):
  def forward(self, x):
    _ = {expr}
    k[(1,)](x, x.numel(), BLOCK=256)
    return x
"""
  report = static_checks.check_candidate(source, "triton")
  assert any("random number generation" in r for r in report.rejections), report.rejections
