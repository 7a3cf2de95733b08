"""Renders a ModuleSpec as a KernelBench-format module source (class Model, get_inputs,
get_init_inputs, module-level size constants).

The output is what `parse.understand` reads back (the round trip is tested) and what
`tasks.kernelbench.validate_reference_source` accepts. The generated source is prompt text, so it
is indented with 4 spaces like KernelBench's files. Pure Python: no torch here.
"""

from __future__ import annotations

import ast
import math

from kernelzero_jax.teacher.family import Op, ModuleSpec

# Size-constant names for the first input's dims, by rank (the last dim is the row length).
_DIM_NAMES = {1: ("dim",), 2: ("batch_size", "dim"), 3: ("batch_size", "seq_len", "dim"),
              4: ("batch_size", "channels", "seq_len", "dim")}

# A phrase per op for the Model's docstring.
_PHRASES = {
    "relu": "ReLU", "gelu": "GELU", "gelu_tanh": "GELU (tanh approximation)", "silu": "SiLU",
    "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp", "abs": "abs", "neg": "negation",
    "square": "square", "softplus": "softplus", "leaky_relu": "LeakyReLU", "elu": "ELU",
    "hardtanh": "Hardtanh", "clamp": "clamp", "scale": "scaling", "add_const": "a constant shift",
    "add": "an addition", "sub": "a subtraction", "mul": "a multiplication",
    "maximum": "an elementwise maximum", "minimum": "an elementwise minimum",
    "sum": "a sum", "mean": "a mean", "max": "a max", "min": "a min", "amax": "an amax",
    "amin": "an amin", "l2norm": "an L2 norm", "rms": "a root mean square",
    "softmax": "softmax", "log_softmax": "log-softmax", "linear": "a linear layer",
    "matmul": "a matrix multiplication",
}


def num(c: float) -> str:
  """A float literal that reads back to the same float (repr round-trips exactly)."""
  if math.isinf(c):
    return "float('inf')" if c > 0 else "-float('inf')"
  return repr(float(c))


def operand_expr(op: Op) -> str:
  return op.operand.name if op.operand.kind == "input" else f"self.{op.operand.name}"


def op_expr(op: Op, x: str = "x") -> str:
  """The torch expression that applies `op` to the value `x`."""
  c = op.consts
  n = op.name
  if n == "relu":
    return f"torch.relu({x})"
  if n == "gelu":
    return f"F.gelu({x})"
  if n == "gelu_tanh":
    return f'F.gelu({x}, approximate="tanh")'
  if n == "silu":
    return f"F.silu({x})"
  if n in ("sigmoid", "tanh", "exp", "abs", "square"):
    return f"torch.{n}({x})"
  if n == "neg":
    return f"-{x}"
  if n == "softplus":
    return f"F.softplus({x})"
  if n == "leaky_relu":
    return f"F.leaky_relu({x}, negative_slope={num(c[0])})"
  if n == "elu":
    return f"F.elu({x}, alpha={num(c[0])})"
  if n == "hardtanh":
    return f"F.hardtanh({x}, min_val={num(c[0])}, max_val={num(c[1])})"
  if n == "clamp":
    sides = ([f"min={num(c[0])}"] if not math.isinf(c[0]) else []) + (
        [f"max={num(c[1])}"] if not math.isinf(c[1]) else [])
    return f"torch.clamp({x}, {', '.join(sides)})"
  if n == "scale":
    return f"{x} * {num(c[0])}"
  if n == "add_const":
    return f"{x} - {num(-c[0])}" if c[0] < 0 else f"{x} + {num(c[0])}"
  o = operand_expr(op)
  if n in ("add", "sub", "mul"):
    return f"{x} {dict(add='+', sub='-', mul='*')[n]} {o}"
  if n in ("maximum", "minimum"):
    return f"torch.{n}({x}, {o})"
  raise ValueError(f"no rendering for op {n!r}")


def core_expr(spec: ModuleSpec, x: str = "x") -> str:
  """The torch expression of the spec's core (reduction, softmax or matmul) applied to `x`."""
  core, keep = spec.core, (", keepdim=True" if spec.keepdim else "")
  if core in ("sum", "mean", "amax", "amin"):
    return f"torch.{core}({x}, dim=-1{keep})"
  if core in ("max", "min"):
    return f"torch.{core}({x}, dim=-1{keep})[0]"
  if core == "l2norm":
    return f"torch.norm({x}, p=2, dim=-1{keep})"
  if core == "rms":
    return f"torch.sqrt(torch.mean({x} * {x}, dim=-1{keep}))"
  if core == "softmax":
    return f"torch.softmax({x}, dim=-1)"
  if core == "log_softmax":
    return f"F.log_softmax({x}, dim=-1)"
  if core == "linear":
    return f"self.{spec.core_operand}({x})"
  if core == "matmul":
    return f"torch.matmul({x}, {spec.core_operand})"
  raise ValueError(f"no rendering for core {core!r}")


def size_names(spec: ModuleSpec) -> dict[str, int]:
  """Module-level size constants, name -> value, in declaration order."""
  if spec.core == "linear":
    weight = spec.param_named(spec.core_operand)
    return {"batch_size": spec.x.shape[0], "in_features": weight.shape[1],
            "out_features": weight.shape[0]}
  if spec.core == "matmul":
    b = spec.input_named(spec.core_operand)
    return {"M": spec.x.shape[0], "K": spec.x.shape[1], "N": b.shape[1]}
  names = _DIM_NAMES.get(len(spec.x.shape)) or tuple(f"dim{i}" for i in range(len(spec.x.shape)))
  return dict(zip(names, spec.x.shape))


def _shape_text(shape: tuple[int, ...], sizes: dict[str, int], preferred: list[str]) -> str:
  """Dims spelled with the size constants that hold them (position-wise), literals otherwise."""
  parts = []
  for i, d in enumerate(shape):
    name = preferred[i] if i < len(preferred) else None
    parts.append(name if name is not None and sizes.get(name) == d else str(d))
  return ", ".join(parts)


def _input_dims(spec: ModuleSpec, name: str, sizes: dict[str, int]) -> list[str]:
  keys = list(sizes)
  if spec.core == "linear":
    return ["batch_size", "in_features"] if name == spec.x.name else ["batch_size", "out_features"]
  if spec.core == "matmul":
    return {spec.x.name: ["M", "K"], spec.core_operand: ["K", "N"]}.get(name, ["M", "N"])
  return keys


def init_arg_names(signature: str) -> list[str]:
  fn = ast.parse(f"def f({signature}):\n  pass").body[0]
  return [a.arg for a in fn.args.args]


def _docstring(spec: ModuleSpec) -> str:
  steps = [_PHRASES[o.name] for o in spec.pre]
  if spec.core:
    where = "" if spec.kind == "matmul" else " over the last dim"
    steps.append(_PHRASES[spec.core] + where)
  steps += [_PHRASES[o.name] for o in spec.post]
  text = ", then ".join(steps)
  return text[0].upper() + text[1:] + "."


def render_module(spec: ModuleSpec) -> str:
  """KernelBench-format source of `spec` (4-space indented, like KernelBench's files)."""
  sizes = size_names(spec)
  lines = ["import torch", "import torch.nn as nn", "import torch.nn.functional as F", "", "",
           "class Model(nn.Module):", f'    """{_docstring(spec)}"""', "",
           f"    def __init__(self{', ' + spec.init_signature if spec.init_signature else ''}):",
           "        super().__init__()"]
  lines += [f"        self.{p.attr} = {p.create}" for p in spec.params]
  lines += ["", f"    def forward(self, {', '.join(i.name for i in spec.inputs)}):"]
  value = spec.x.name
  for op in spec.pre:
    lines.append(f"        x = {op_expr(op, value)}")
    value = "x"
  if spec.core:
    lines.append(f"        x = {core_expr(spec, value)}")
    value = "x"
  for op in spec.post:
    lines.append(f"        x = {op_expr(op, value)}")
  lines += ["        return x", ""]
  lines += [""] + [f"{k} = {v}" for k, v in sizes.items()] + ["", ""]
  lines.append("def get_inputs():")
  for i in spec.inputs:
    dims = _shape_text(i.shape, sizes, _input_dims(spec, i.name, sizes))
    lines.append(f"    {i.name} = torch.{i.dist}({dims})")
  lines += [f"    return [{', '.join(i.name for i in spec.inputs)}]", "", ""]
  args = init_arg_names(spec.init_signature) if spec.init_signature else []
  values = [a if a in sizes and sizes[a] == v else repr(v) for a, v in zip(args, spec.init_values)]
  lines += ["def get_init_inputs():", f"    return [{', '.join(values)}]", ""]
  return "\n".join(lines)
