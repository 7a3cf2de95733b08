"""The teacher's entry point: a module source in, a ModelNew source out.

`teach(source, backend)` understands the module (parse.py, raising NotInFamily for modules
outside the family) and writes the backend's candidate from the spec. It runs nothing of the
module and imports no torch, so the trainer's process may call it.
"""

from __future__ import annotations

import io
import tokenize
from typing import Callable

from kernelzero_jax.teacher.cuda_writer import write_cuda
from kernelzero_jax.teacher.family import ModuleSpec
from kernelzero_jax.teacher.parse import understand
from kernelzero_jax.teacher.triton_writer import write_triton

WRITERS: dict[str, Callable[[ModuleSpec], str]] = {"triton": write_triton, "cuda": write_cuda}


def strip_comments(source: str) -> str:
  """`source` without its Python comments: a comment line goes, a trailing comment is cut.

  Read with `tokenize`, so a '#' inside a string (e.g. CUDA source) stays. The writers comment
  why each line is there, which teaches a large model; a tiny one learns the code faster without.
  """
  lines = source.splitlines(keepends=True)
  comments = [t.start for t in tokenize.generate_tokens(io.StringIO(source).readline)
              if t.type == tokenize.COMMENT]
  drop = set()
  for row, col in comments:
    line = lines[row - 1]
    if line[:col].strip():
      lines[row - 1] = line[:col].rstrip() + "\n"
    else:
      drop.add(row - 1)
  return "".join(line for i, line in enumerate(lines) if i not in drop)


def write(spec: ModuleSpec, backend: str, comments: bool = True) -> str:
  """The ModelNew source for `spec` in `backend` ("triton" or "cuda"), with the writer's
  comments or (comments=False) without."""
  if backend not in WRITERS:
    raise ValueError(f"unknown backend {backend!r}; expected one of {sorted(WRITERS)}")
  source = WRITERS[backend](spec)
  return source if comments else strip_comments(source)


def teach(source: str, backend: str) -> str:
  """The teacher's ModelNew for a KernelBench-format module; NotInFamily if it cannot."""
  return write(understand(source), backend)
