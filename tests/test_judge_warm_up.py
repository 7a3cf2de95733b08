"""A GPU judge loads what its first reference check needs when it starts (judge_gpu.warm_up_device,
SandboxConfig.judge_warm_up), outside the GPU hold: it must run the check's own helpers, on so
few elements that another judge's timing cannot see it. Its effect on the first check's time is
measured on a GPU (benchmarks/first_run.py, warm-up `judge`)."""

from __future__ import annotations

import torch

from kernelzero_jax.sandbox import judge_gpu
from kernelzero_jax.sandbox import problem


def test_the_warm_up_runs_a_checks_helpers_on_a_few_elements(monkeypatch):
  calls = []
  make_inputs, inputs_unchanged, mm = problem.make_inputs, problem.inputs_unchanged, torch.mm

  def recorded(name, fn):
    def call(*args, **kwargs):
      out = fn(*args, **kwargs)
      tensors = [x for x in (out if isinstance(out, list) else [out])
                 if isinstance(x, torch.Tensor)]
      tensors += [x for a in args if isinstance(a, list) for x in a if isinstance(x, torch.Tensor)]
      calls.append((name, max((x.numel() for x in tensors), default=0)))
      return out
    return call
  monkeypatch.setattr(problem, "make_inputs", recorded("make_inputs", make_inputs))
  monkeypatch.setattr(problem, "inputs_unchanged", recorded("inputs_unchanged", inputs_unchanged))
  monkeypatch.setattr(torch, "mm", recorded("mm", mm))
  judge_gpu.warm_up_device(torch, problem, torch.device("cpu"))
  assert [name for name, _ in calls] == ["make_inputs", "mm", "inputs_unchanged"]
  assert all(0 < n <= 256 for _, n in calls)
