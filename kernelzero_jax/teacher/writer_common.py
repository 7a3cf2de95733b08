"""What the Triton and CUDA writers share: the tensors a kernel reads besides its main input,
their argument names, ModelNew's constructor, and the block-size rules that do not depend on the
backend.

ModelNew repeats the reference's constructor (same signature, same parameters created in the
same order by the same expressions) so that weights drawn from the same seed match; constants
that the reference reads from constructor arguments are already folded into the spec's ops.
Pure Python: no torch here.
"""

from __future__ import annotations

import dataclasses

from kernelzero_jax.teacher.family import ModuleSpec, Op

# Names the generated launchers and kernels use for themselves; an operand never takes one.
RESERVED = frozenset({
    "x", "a", "b", "w", "out", "row", "cols", "mask", "v", "e", "offsets", "start", "pid",
    "pid_m", "pid_n", "offs_m", "offs_n", "offs_k", "acc", "n_elements", "n_cols", "n_rows", "M",
    "N", "K", "BLOCK", "BLOCK_M", "BLOCK_N", "BLOCK_K", "grid", "torch", "triton", "tl", "nn",
    "math", "self", "weight", "linear_bias", "total", "result", "denom", "row_max", "threads",
    "blocks", "shape", "sizes", "ks", "kk", "k0", "tile", "m", "m_new", "s",
    # C names the CUDA kernels use or call.
    "i", "n", "r", "c", "tx", "ty", "shared", "lane", "warp", "offset", "other", "a_tile",
    "b_tile", "log_denom", "floor", "ceil", "exp", "abs", "max", "min", "sqrt", "int", "float",
    "const", "auto", "signed", "unsigned", "double", "long", "short", "char", "bool",
})


@dataclasses.dataclass(frozen=True)
class Operand:
  """A tensor the kernel reads for a binary op: a forward input or a parameter row.

  `arg` is its name in the launcher and kernel (the kernel's pointer is `{arg}_ptr`); `expr`
  is how ModelNew.forward passes it.
  """
  kind: str  # "input" | "row"
  name: str
  arg: str

  @property
  def expr(self) -> str:
    return self.name if self.kind == "input" else f"self.{self.name}"


def chain_operands(spec: ModuleSpec) -> list[Operand]:
  """Every distinct operand of the spec's ops, in order of first use."""
  out: dict[tuple[str, str], Operand] = {}
  taken = set(RESERVED)
  for op in spec.ops:
    if op.operand is None or (op.operand.kind, op.operand.name) in out:
      continue
    arg = op.operand.name
    while arg in taken:
      arg += "_t"
    taken.add(arg)
    out[(op.operand.kind, op.operand.name)] = Operand(op.operand.kind, op.operand.name, arg)
  return list(out.values())


def operand_of(op: Op, operands: list[Operand]) -> Operand:
  return next(o for o in operands if (o.kind, o.name) == (op.operand.kind, op.operand.name))


def init_lines(spec: ModuleSpec) -> list[str]:
  """ModelNew's constructor (4-space indented, like the rest of the candidate)."""
  sig = f"self, {spec.init_signature}" if spec.init_signature else "self"
  lines = [f"    def __init__({sig}):", "        super().__init__()"]
  if spec.params:
    lines += ["        # The reference's parameters, created the same way and in the same",
              "        # order, so that the same seed gives the same weights."]
  lines += [f"        self.{p.attr} = {p.create}" for p in spec.params]
  return lines


def forward_args(spec: ModuleSpec, operands: list[Operand]) -> list[str]:
  """What ModelNew.forward passes to the launcher: the first input, the matmul's other operand
  (nn.Linear's weight and bias, read from the module, or the second input), then the operands."""
  args = [spec.x.name]
  if spec.core == "linear":
    lin = spec.param_named(spec.core_operand)
    args.append(f"self.{lin.attr}.weight")
    if lin.bias:
      args.append(f"self.{lin.attr}.bias")
  elif spec.core == "matmul":
    args.append(spec.core_operand)
  return args + [o.expr for o in operands]


def next_power_of_2(n: int) -> int:
  return 1 << max(0, (n - 1).bit_length())


def op_comment(op: Op) -> str:
  """A short comment naming an op and its constants."""
  if op.operand is not None:
    where = ("a second input" if op.operand.kind == "input"
             else "a parameter row, broadcast over the rows")
    return f"{op.name} with {op.operand.name} ({where})"
  if op.consts:
    return f"{op.name}({', '.join(f'{c:g}' for c in op.consts)})"
  return op.name


def wrap_call(head: str, args: list[str], tail: str = ")", width: int = 100) -> list[str]:
  """`head` + args joined by ", " + `tail`, wrapped at `width` with continuation lines aligned
  after the opening parenthesis (head ends with it)."""
  lines, current = [], head
  pad = " " * len(head.lstrip("\n"))
  for i, a in enumerate(args):
    piece = a + (", " if i < len(args) - 1 else tail)
    if len(current) + len(piece.rstrip()) > width and current.strip() != head.strip():
      lines.append(current.rstrip())
      current = pad
    current += piece
  if not args:
    current += tail
  lines.append(current)
  return lines
