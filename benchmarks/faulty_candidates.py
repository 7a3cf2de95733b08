"""Failing variants of working candidates, for batches that fail as an RL step's do.

A Coder early in RL gets most of its candidates wrong (the held-out evaluations in BENCHMARKS.md:
200 or more of 232 not correct), while the throughput batches are mostly kernels that pass. What
a failure costs the sandbox differs by where it fails, and a kept worker's failure is judged
again in a fresh one (Judge.run), so a batch of passing kernels does not tell what an RL step
pays. `inject` turns a working candidate (the teacher's kernels) into one that fails in a chosen
way, keeping everything else as it was:

- `compile`: its kernel does not compile (CUDA: an `#error` line before the first `__global__`,
  which stops nvcc in its preprocessor; Triton: a failing `tl.static_assert` at the top of the
  first `@triton.jit` function, which fails its compilation on a GPU and its first call under
  the CPU interpreter);
- `undeclared`: its kernel calls a function declared nowhere, as a model's kernels often do
  (CUDA: at the top of the first `__global__` function's body, which the compiler finds only
  after parsing every header before it; Triton: in the first `@triton.jit` function, which the
  static checks reject before anything runs);
- `runtime`: its forward raises before it launches anything (as a shape or launch error would);
- `torchop`: its forward runs the kernel and then a torch op on the output, which the sandbox
  rejects after the first check (the cost of a wrong answer found by the first comparison).
"""

from __future__ import annotations

import ast
import re

FAULTS = ("compile", "runtime", "torchop", "undeclared")

# What each fault leaves in a verdict's reasons (tests/test_faulty_candidates.py).
MARKER = "kz_injected_fault"

_RUNTIME = f'''

def _{MARKER}_forward(self, *args, **kwargs):
    raise RuntimeError("{MARKER}: the forward failed")


ModelNew.forward = _{MARKER}_forward
'''

_TORCHOP = f'''

_{MARKER}_kernel_forward = ModelNew.forward


def _{MARKER}_forward(self, *args, **kwargs):
    return _{MARKER}_kernel_forward(self, *args, **kwargs) * 1.0  # a torch op: rejected


ModelNew.forward = _{MARKER}_forward
'''


class FaultError(ValueError):
  """The candidate has no place for the fault asked for (e.g. no CUDA or Triton kernel)."""


def inject(source: str, backend: str, fault: str) -> str:
  """`source` (a working candidate of `backend`) made to fail by `fault` (FAULTS)."""
  if fault not in FAULTS:
    raise ValueError(f"fault must be one of {FAULTS}, got {fault!r}")
  if backend not in ("cuda", "triton"):
    raise ValueError(f"backend must be 'cuda' or 'triton', got {backend!r}")
  if "class ModelNew" not in source:
    raise FaultError("the candidate defines no class ModelNew")
  if fault == "runtime":
    return source.rstrip("\n") + "\n" + _RUNTIME
  if fault == "torchop":
    return source.rstrip("\n") + "\n" + _TORCHOP
  if fault == "undeclared":
    return (_cuda_undeclared_fault(source) if backend == "cuda"
            else _triton_compile_fault(source, f"{MARKER}_undeclared()"))
  return _cuda_compile_fault(source) if backend == "cuda" else _triton_compile_fault(source)


def _cuda_compile_fault(source: str) -> str:
  # (In a string that load_inline compiles: `__global__` appears nowhere else in a candidate.)
  m = re.search(r"^[ \t]*__global__\b", source, re.MULTILINE)
  if m is None:
    raise FaultError("no __global__ kernel at the start of a line")
  return f"{source[:m.start()]}#error {MARKER}: the kernel does not compile\n{source[m.start():]}"


def _cuda_undeclared_fault(source: str) -> str:
  m = re.search(r"^[ \t]*__global__\b[^{;]*\{", source, re.MULTILINE)
  if m is None:
    raise FaultError("no __global__ kernel with a body at the start of a line")
  return f"{source[:m.end()]}\n  {MARKER}_undeclared();{source[m.end():]}"


def _is_triton_jit(decorator: ast.expr) -> bool:
  target = decorator.func if isinstance(decorator, ast.Call) else decorator
  return ((isinstance(target, ast.Attribute) and target.attr == "jit"
           and isinstance(target.value, ast.Name) and target.value.id == "triton")
          or (isinstance(target, ast.Name) and target.id == "jit"))


def _triton_compile_fault(source: str, statement: str | None = None) -> str:
  """`statement` (default: a failing tl.static_assert) as the first jit function's first."""
  if not re.search(r"^import triton\.language as tl$", source, re.MULTILINE):
    raise FaultError("triton.language is not imported as tl")
  statement = statement or f'tl.static_assert(False, "{MARKER}: the kernel does not compile")'
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.FunctionDef) and any(map(_is_triton_jit, node.decorator_list)):
      first = node.body[0]
      lines = source.splitlines(keepends=True)
      line = f'{" " * first.col_offset}{statement}\n'
      return "".join(lines[:first.lineno - 1] + [line] + lines[first.lineno - 1:])
  raise FaultError("no @triton.jit function")
