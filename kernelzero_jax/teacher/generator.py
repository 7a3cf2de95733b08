"""Draws modules of the family (family.py): varied op chains, constants and shapes.

`sample_spec` draws one ModuleSpec; `generate_modules` draws a deterministic list of rendered
modules from one split. Sizes: "small" keeps every tensor at or below 64k elements so that
Triton's CPU interpreter judges a candidate in seconds; "full" draws GPU sizes like KernelBench's
(tens to hundreds of millions of elements, 1k-8k matmuls), far too big for the interpreter.

The chain sampler tracks an interval that holds the values (inputs from randn lie within +-5 for
any size used here) and refuses an op that would overflow float32 or squeeze the output into a
near-constant: such a module cannot tell a right kernel from a wrong one at atol=rtol=1e-2.
Pure Python: no torch here.
"""

from __future__ import annotations

import math
import random
from typing import Optional

from kernelzero_jax.teacher import family
from kernelzero_jax.teacher.family import Input, ModuleSpec, Op, Operand, Param
from kernelzero_jax.teacher.render import render_module

SIZES = ("small", "full")
SMALL_MAX_ELEMENTS = 1 << 16

_INPUT_BOUND = 5.0  # |randn| over <= 2^28 draws
_MAX_MAGNITUDE = 1e4  # beyond this, exp and squares soon overflow float32
_MIN_WIDTH = 0.1  # outputs narrower than this are nearly constant at atol=1e-2
_OPERAND_NAMES = ("y", "z", "u", "v")
_PARAM_NAMES = {"add": "bias", "sub": "shift", "mul": "gain", "maximum": "floor",
                "minimum": "ceiling"}
_MAX_INPUT_OPERANDS = 2
_MAX_ROW_OPERANDS = 2
_CHAIN_LENGTHS = {"elementwise": (1, 4), "reduction": (0, 3), "softmax": (0, 2),
                  "matmul": (0, 4)}


def _sigmoid(v: float) -> float:
  return 1.0 / (1.0 + math.exp(-max(min(v, 50.0), -50.0)))


def _softplus(v: float) -> float:
  return v if v > 20 else math.log1p(math.exp(v))


def _interval(op: Op, lo: float, hi: float) -> tuple[float, float] | None:
  """An interval holding op's outputs for inputs in [lo, hi] (None: would overflow)."""
  n, c = op.name, op.consts
  if n == "exp" and hi > 30:
    return None
  if n == "relu":
    return max(lo, 0.0), max(hi, 0.0)
  if n in ("gelu", "gelu_tanh", "silu"):
    return (min(0.0, max(lo, -0.3)), max(hi, 0.0)) if lo < 0 else (lo / 2, hi)
  if n == "sigmoid":
    return _sigmoid(lo), _sigmoid(hi)
  if n == "tanh":
    return math.tanh(lo), math.tanh(hi)
  if n == "exp":
    return math.exp(lo), math.exp(hi)
  if n == "abs":
    return (0.0 if lo < 0 < hi else min(abs(lo), abs(hi))), max(abs(lo), abs(hi))
  if n == "neg":
    return -hi, -lo
  if n == "square":
    return (0.0 if lo < 0 < hi else min(lo * lo, hi * hi)), max(lo * lo, hi * hi)
  if n == "softplus":
    return _softplus(lo), _softplus(hi)
  if n == "leaky_relu":
    return (lo * c[0] if lo < 0 else lo), (hi * c[0] if hi < 0 else hi)
  if n == "elu":
    return (c[0] * math.expm1(lo) if lo < 0 else lo), (c[0] * math.expm1(hi) if hi < 0 else hi)
  if n in ("hardtanh", "clamp"):
    return min(max(lo, c[0]), c[1]), min(max(hi, c[0]), c[1])
  if n == "scale":
    return min(lo * c[0], hi * c[0]), max(lo * c[0], hi * c[0])
  if n == "add_const":
    return lo + c[0], hi + c[0]
  b = _INPUT_BOUND  # a randn operand
  if n in ("add", "sub"):
    return lo - b, hi + b
  if n == "mul":
    m = max(abs(lo), abs(hi)) * b
    return -m, m
  if n == "maximum":
    return max(lo, -b), max(hi, b)
  if n == "minimum":
    return min(lo, -b), min(hi, b)
  raise ValueError(f"no interval rule for {n}")


def _consts(rng: random.Random, name: str) -> tuple[float, ...]:
  if name == "leaky_relu":
    return (rng.choice([0.01, 0.02, 0.05, 0.1, 0.2, 0.25]),)
  if name == "elu":
    return (rng.choice([0.5, 1.0, 1.5, 2.0]),)
  if name == "hardtanh":
    return rng.choice([(-1.0, 1.0), (-0.5, 0.5), (-2.0, 2.0), (-3.0, 3.0), (0.0, 6.0)])
  if name == "clamp":
    lo = rng.choice([-2.0, -1.5, -1.0, -0.5, 0.0, 0.25])
    hi = lo + rng.choice([0.5, 1.0, 2.0, 3.0])
    side = rng.random()
    return (-math.inf, hi) if side < 0.15 else (lo, math.inf) if side < 0.3 else (lo, hi)
  if name == "scale":
    return (round(rng.uniform(0.1, 3.0), 2) * (-1 if rng.random() < 0.25 else 1),)
  if name == "add_const":
    return (round(rng.uniform(0.05, 2.0), 2) * rng.choice([-1, 1]),)
  return ()


class _ChainBuilder:
  """Draws ops one at a time, naming the operands and parameters they need."""

  def __init__(self, rng: random.Random, row_dim_name: str):
    self.rng = rng
    self.row_dim_name = row_dim_name
    self.input_operands: list[str] = []
    self.row_params: list[str] = []

  def draw(self, lo: float, hi: float) -> tuple[Op, tuple[float, float]] | None:
    for _ in range(20):
      op = self._candidate()
      if op is None:
        continue
      bounds = _interval(op, lo, hi)
      if bounds is None:
        continue
      new_lo, new_hi = bounds
      if (max(abs(new_lo), abs(new_hi)) > _MAX_MAGNITUDE or new_hi - new_lo < _MIN_WIDTH
          or max(abs(new_lo), abs(new_hi)) < 0.05):
        continue
      self._commit(op)
      return op, bounds
    return None

  def _candidate(self) -> Op | None:
    rng = self.rng
    if rng.random() < 0.3:
      name = rng.choice(family.BINARY_OPS)
      if rng.random() < 0.5:
        if len(self.input_operands) >= _MAX_INPUT_OPERANDS:
          return None
        return Op(name, operand=Operand("input", _OPERAND_NAMES[len(self.input_operands)]))
      if len(self.row_params) >= _MAX_ROW_OPERANDS:
        return None
      base = _PARAM_NAMES[name]
      attr = base if base not in self.row_params else f"{base}{len(self.row_params) + 1}"
      return Op(name, operand=Operand("row", attr))
    name = rng.choice(sorted(family.UNARY_OPS))
    return Op(name, _consts(rng, name))

  def _commit(self, op: Op) -> None:
    if op.operand is None:
      return
    if op.operand.kind == "input":
      self.input_operands.append(op.operand.name)
    else:
      self.row_params.append(op.operand.name)

  def chain(self, length: int, lo: float, hi: float) -> tuple[tuple[Op, ...], float, float]:
    ops = []
    for _ in range(length):
      drawn = self.draw(lo, hi)
      if drawn is None:
        break
      op, (lo, hi) = drawn
      ops.append(op)
    return tuple(ops), lo, hi

  def param_decls(self, size: int) -> tuple[Param, ...]:
    return tuple(Param(a, "tensor", (size,), f"nn.Parameter(torch.randn({self.row_dim_name}))")
                 for a in self.row_params)


def _row_shape(rng: random.Random, size: str, kind: str) -> tuple[int, ...]:
  """The first input's shape: its last dim is the row length."""
  if size == "small":
    if kind == "elementwise":
      cols = rng.choice([16, 32, 33, 64, 100, 128, 255, 256, 500, 512, 1000, 1024])
      rank = rng.choice([2, 2, 3, 4])
    else:
      cols = rng.choice([7, 16, 32, 100, 128, 255, 256, 512, 1000, 1024, 2048, 3000, 4096,
                         5000, 6000, 8192])
      rank = rng.choice([2, 2, 3])
    budget = SMALL_MAX_ELEMENTS // cols
    lead = []
    for _ in range(rank - 1):
      options = [d for d in (1, 2, 3, 4, 8, 16, 32, 64, 128) if d <= budget]
      d = rng.choice(options[1:] if len(options) > 1 else options)
      lead.append(d)
      budget //= d
    return tuple(lead) + (cols,)
  if kind == "elementwise":
    cols = rng.choice([4096, 8192, 16384, 65536])
  else:
    cols = rng.choice([1000, 4096, 8192, 16384, 32768, 65535])
  rows = rng.choice([1024, 2048, 4096, 8192, 16384])
  while rows * cols > (1 << 28):
    rows //= 2
  if rng.random() < 0.3 and rows >= 256:
    return (rows // 128, 128, cols)
  return (rows, cols)


def _matmul_sizes(rng: random.Random, size: str) -> tuple[int, int, int]:
  if size == "small":
    return (rng.choice([4, 8, 16, 32, 64, 100, 128]), rng.choice([16, 32, 64, 100, 128, 256]),
            rng.choice([16, 32, 64, 96, 128, 200, 256]))
  return (rng.choice([512, 1024, 2048, 4096]), rng.choice([1024, 2048, 4096, 8192]),
          rng.choice([1024, 2048, 4096, 8192]))


def sample_spec(rng: random.Random, kind: str | None = None, size: str = "small") -> ModuleSpec:
  """One module of the family; `kind` None draws one of family.KINDS uniformly."""
  if size not in SIZES:
    raise ValueError(f"size must be one of {SIZES}, got {size!r}")
  kind = kind or rng.choice(family.KINDS)
  if kind not in family.KINDS:
    raise ValueError(f"unknown kind {kind!r}; expected one of {family.KINDS}")
  lo_len, hi_len = _CHAIN_LENGTHS[kind]
  if kind == "matmul":
    return _sample_matmul(rng, size, rng.randint(lo_len, hi_len))
  shape = _row_shape(rng, size, kind)
  builder = _ChainBuilder(rng, "dim")
  lo, hi = -_INPUT_BOUND, _INPUT_BOUND
  min_len = 1 if kind == "elementwise" else 0
  pre, lo, hi = builder.chain(rng.randint(max(lo_len, min_len), hi_len), lo, hi)
  if kind == "elementwise" and not pre:
    pre = (Op("relu"),)
  core, keepdim, post = None, False, ()
  if kind == "reduction":
    core, keepdim = rng.choice(family.REDUCTIONS), rng.random() < 0.4
  elif kind == "softmax":
    core = rng.choice(family.SOFTMAXES)
    # Softmax lies in (0, 1); log-softmax in (-(spread + log n), 0].
    out = (0.0, 1.0) if core == "softmax" else (-(hi - lo) - math.log(shape[-1]), 0.0)
    post, _, _ = builder.chain(rng.randint(0, 2), *out)
  inputs = (Input("x", shape),) + tuple(Input(n, shape) for n in builder.input_operands)
  params = builder.param_decls(shape[-1])
  return ModuleSpec(kind=kind, inputs=inputs, pre=pre, core=core, keepdim=keepdim, post=post,
                    params=params, init_signature="dim" if params else "",
                    init_values=(shape[-1],) if params else ())


def _sample_matmul(rng: random.Random, size: str, length: int) -> ModuleSpec:
  m, k, n = _matmul_sizes(rng, size)
  if rng.random() < 0.6:
    builder = _ChainBuilder(rng, "out_features")
    bias = rng.random() < 0.8
    # nn.Linear draws weights from U(-1/sqrt(k), 1/sqrt(k)): outputs have std ~0.6 for |x| <= 5.
    post, _, _ = builder.chain(length, -3.0, 3.0)
    linear = Param("linear", "linear", (n, k),
                   "nn.Linear(in_features, out_features" + ("" if bias else ", bias=False") + ")",
                   bias=bias)
    inputs = (Input("x", (m, k)),) + tuple(Input(o, (m, n)) for o in builder.input_operands)
    return ModuleSpec(kind="matmul", inputs=inputs, core="linear", core_operand="linear",
                      post=post, params=(linear,) + builder.param_decls(n),
                      init_signature="in_features, out_features", init_values=(k, n))
  builder = _ChainBuilder(rng, "N")
  spread = 4.0 * math.sqrt(k)  # a sum of k products of two randn values
  post, _, _ = builder.chain(length, -spread, spread)
  inputs = ((Input("a", (m, k)), Input("b", (k, n)))
            + tuple(Input(o, (m, n)) for o in builder.input_operands))
  params = builder.param_decls(n)
  return ModuleSpec(kind="matmul", inputs=inputs, core="matmul", core_operand="b", post=post,
                    params=params, init_signature="N" if params else "",
                    init_values=(n,) if params else ())


def num_ops(spec: ModuleSpec) -> int:
  """The operations a module chains: its ops and its core (reduction, softmax or matmul)."""
  return len(spec.ops) + (1 if spec.core else 0)


def kind_of(name: str) -> str:
  """The module kind at the end of a generated module's name ({split}_{index}_{kind}, as
  generate_modules names them; the warm start's problem files keep that ending); another name
  gives its last _-separated part."""
  return name.rsplit("_", 1)[-1]


def generate_modules(n: int, seed: int, split: str = "train", size: str = "small",
                     kinds: tuple[str, ...] = family.KINDS, max_ops: Optional[int] = None
                     ) -> list[tuple[str, str, ModuleSpec]]:
  """`n` distinct modules of one split as (name, source, spec), the same for the same arguments.

  Kinds take turns (so every kind is covered evenly); a spec of the other split, or with more
  than `max_ops` operations (num_ops; None: any number), is drawn again.
  """
  if split not in family.SPLITS:
    raise ValueError(f"split must be one of {family.SPLITS}, got {split!r}")
  if max_ops is not None and max_ops < 1:
    raise ValueError(f"max_ops must be >= 1 (every module has an operation), got {max_ops}")
  rng = random.Random(f"kernelzero-teacher-{seed}")
  out: list[tuple[str, str, ModuleSpec]] = []
  seen: set[ModuleSpec] = set()
  attempts = 0
  while len(out) < n:
    attempts += 1
    if attempts > 1000 * (n + 10):
      raise RuntimeError(f"could not draw {n} distinct {split} modules of kinds {kinds}"
                         + (f" with at most {max_ops} operations" if max_ops else ""))
    kind = kinds[len(out) % len(kinds)]
    spec = sample_spec(rng, kind, size)
    if spec.split() != split or spec in seen or (max_ops is not None
                                                 and num_ops(spec) > max_ops):
      continue
    seen.add(spec)
    out.append((f"{split}_{len(out):05d}_{spec.kind}", render_module(spec), spec))
  return out
