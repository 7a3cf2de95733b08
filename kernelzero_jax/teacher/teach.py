"""The teacher's entry point: a module source in, a ModelNew source out.

`teach(source, backend)` understands the module (parse.py, raising NotInFamily for modules
outside the family) and writes the backend's candidate from the spec. It runs nothing of the
module and imports no torch, so the trainer's process may call it.
"""

from __future__ import annotations

from typing import Callable

from kernelzero_jax.teacher.cuda_writer import write_cuda
from kernelzero_jax.teacher.family import ModuleSpec
from kernelzero_jax.teacher.parse import understand
from kernelzero_jax.teacher.triton_writer import write_triton

WRITERS: dict[str, Callable[[ModuleSpec], str]] = {"triton": write_triton, "cuda": write_cuda}


def write(spec: ModuleSpec, backend: str) -> str:
  """The ModelNew source for `spec` in `backend` ("triton" or "cuda")."""
  if backend not in WRITERS:
    raise ValueError(f"unknown backend {backend!r}; expected one of {sorted(WRITERS)}")
  return WRITERS[backend](spec)


def teach(source: str, backend: str) -> str:
  """The teacher's ModelNew for a KernelBench-format module; NotInFamily if it cannot."""
  return write(understand(source), backend)
