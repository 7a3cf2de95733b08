"""The module family that the teacher understands: a small IR (`ModuleSpec`) and its vocabulary.

A module of the family is one chain of tensor operations on its first input:

  elementwise   x -> op -> op -> ...
  reduction     x -> op ... -> reduce over the last dim (sum, mean, max, min, amax, amin,
                l2norm, rms)
  softmax       x -> op ... -> softmax | log_softmax over the last dim -> op ...
  matmul        x -> x @ W^T + b (nn.Linear) | x @ B (a second input) -> op ... (the epilogue)

An op is unary (relu, gelu, a scale by a constant, ...) or binary with a second operand that is
either another forward input of the value's shape or an `nn.Parameter` row the size of the last
dim, broadcast over the rows. Everything is float32.

The vocabulary is hand-written, and spelled in the Proposer's API catalog
(proposer/catalog.py): `CATALOG_APIS` names the catalog APIs each op's rendered code calls, and a
test reads every rendered module's forward with the catalog (`catalog.forward_apis`) and finds
exactly `spec.apis()`. So the modules the teacher covers are named in the APIs the Proposer
samples. Two ops have none: `neg` (unary minus) and `square` (torch.square).

Train / held-out split: a spec belongs to the held-out split when a hash of its op *structure*
(kind, core op and the names of the chain's ops; not constants, shapes, operand kinds, keepdim or
attribute names, and with aliases of the same math merged: amax = max, amin = min, hardtanh =
clamp) falls in the held-out bucket. So an op chain that appears in held-out never appears in
train, with any shapes or constants. Pure Python: no torch here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math

KINDS = ("elementwise", "reduction", "softmax", "matmul")

# Unary ops and the number of constants each takes (in order).
UNARY_OPS: dict[str, int] = {
    "relu": 0, "gelu": 0, "gelu_tanh": 0, "silu": 0, "sigmoid": 0, "tanh": 0, "exp": 0,
    "abs": 0, "neg": 0, "square": 0, "softplus": 0,
    "leaky_relu": 1,  # negative slope
    "elu": 1,  # alpha
    "hardtanh": 2,  # (min_val, max_val)
    "clamp": 2,  # (min, max); either side may be infinite (a one-sided clamp)
    "scale": 1,  # x * c
    "add_const": 1,  # x + c
}
BINARY_OPS = ("add", "sub", "mul", "maximum", "minimum")
# A binary op's second operand: another forward input of the value's full shape, or a parameter
# row of the last dim's size broadcast over all rows.
OPERAND_KINDS = ("input", "row")

REDUCTIONS = ("sum", "mean", "max", "min", "amax", "amin", "l2norm", "rms")
SOFTMAXES = ("softmax", "log_softmax")
MATMULS = ("linear", "matmul")
CORES = {"elementwise": (None,), "reduction": REDUCTIONS, "softmax": SOFTMAXES,
         "matmul": MATMULS}

INPUT_DISTRIBUTIONS = ("randn", "rand")
PARAM_KINDS = ("linear", "tensor")

# The Proposer's catalog APIs (proposer/catalog.py) that each op's and core's rendered code
# calls (render.py); () where the catalog has none. add_const with a negative constant is
# written as a subtraction (ModuleSpec.apis).
CATALOG_APIS: dict[str, tuple[str, ...]] = {
    **{name: (name,) for name in ("relu", "silu", "sigmoid", "tanh", "exp", "abs", "softplus",
                                  "leaky_relu", "elu", "hardtanh", "clamp", "add", "sub", "mul",
                                  "maximum", "minimum", "sum", "mean", "max", "min", "amax",
                                  "amin", "softmax", "log_softmax", "linear", "matmul")},
    "gelu": ("gelu",), "gelu_tanh": ("gelu",), "scale": ("mul",), "add_const": ("add",),
    "neg": (), "square": (), "l2norm": ("norm",), "rms": ("sqrt", "mean", "mul"),
}

# Names that are the same math under two spellings; merged for the split so that the same chain
# cannot sit in train under one name and in held-out under the other.
SPLIT_ALIASES = {"amax": "max", "amin": "min", "hardtanh": "clamp"}
HELDOUT_PERCENT = 20
SPLITS = ("train", "heldout")


@dataclasses.dataclass(frozen=True)
class Operand:
  """The second argument of a binary op: a forward input's name, or a parameter's attribute."""
  kind: str  # one of OPERAND_KINDS
  name: str


@dataclasses.dataclass(frozen=True)
class Op:
  """One elementwise op of a chain."""
  name: str
  consts: tuple[float, ...] = ()
  operand: Operand | None = None

  def __post_init__(self):
    if self.name in UNARY_OPS:
      if len(self.consts) != UNARY_OPS[self.name] or self.operand is not None:
        raise ValueError(f"op {self.name} takes {UNARY_OPS[self.name]} constants and no operand, "
                         f"got {self.consts} / {self.operand}")
      if any(math.isnan(c) for c in self.consts):
        raise ValueError(f"op {self.name}: NaN constant")
    elif self.name in BINARY_OPS:
      if self.consts or self.operand is None or self.operand.kind not in OPERAND_KINDS:
        raise ValueError(f"binary op {self.name} needs one operand of kind {OPERAND_KINDS}")
    else:
      raise ValueError(f"unknown op {self.name!r}")


@dataclasses.dataclass(frozen=True)
class Input:
  """A forward argument: a float32 tensor drawn by torch.randn / torch.rand."""
  name: str
  shape: tuple[int, ...]
  dist: str = "randn"


@dataclasses.dataclass(frozen=True)
class Param:
  """Something the constructor creates that holds parameters, in creation order (the order
  decides which values the seeded generator gives each one, so ModelNew must repeat it).

  `create` is the creating expression as source text (e.g. "nn.Linear(in_features, 64)"),
  naming only constructor arguments, literals, `nn` and `torch`, so that ModelNew can repeat it
  verbatim. `shape` is the weight's shape for a linear ((out, in)), the tensor's otherwise.
  """
  attr: str
  kind: str  # one of PARAM_KINDS
  shape: tuple[int, ...]
  create: str
  bias: bool = False  # linear only: whether nn.Linear has its own bias


@dataclasses.dataclass(frozen=True)
class ModuleSpec:
  """One module of the family (see the module docstring).

  `inputs` are the forward arguments in order; the chain starts from the first. `core` is the
  reduction / softmax / matmul between the `pre` and `post` chains (None for elementwise, whose
  chain is `pre`). `core_operand` names the nn.Linear attribute (core "linear") or the second
  input (core "matmul"). `init_signature` is the constructor's parameter list as source text
  (without self) and `init_values` the values get_init_inputs() passes to it.
  """
  kind: str
  inputs: tuple[Input, ...]
  pre: tuple[Op, ...] = ()
  core: str | None = None
  core_operand: str | None = None
  keepdim: bool = False
  post: tuple[Op, ...] = ()
  params: tuple[Param, ...] = ()
  init_signature: str = ""
  init_values: tuple = ()

  def __post_init__(self):
    if self.kind not in KINDS:
      raise ValueError(f"unknown kind {self.kind!r}; expected one of {KINDS}")
    if self.core not in CORES[self.kind]:
      raise ValueError(f"kind {self.kind} takes core in {CORES[self.kind]}, got {self.core!r}")
    if not self.inputs:
      raise ValueError("a module needs at least one input")
    if self.kind == "elementwise" and (not self.pre or self.post):
      raise ValueError("an elementwise module is a non-empty `pre` chain and no `post`")
    if self.kind == "reduction" and self.post:
      raise ValueError("a reduction takes no ops after it")
    if self.kind == "matmul":
      if self.pre:
        raise ValueError("a matmul takes no ops before it (only an epilogue)")
      if len(self.inputs[0].shape) != 2 or not self.core_operand:
        raise ValueError("a matmul needs a 2-D first input and a core_operand")
    if self.keepdim and self.kind != "reduction":
      raise ValueError("keepdim is for reductions")

  @property
  def x(self) -> Input:
    return self.inputs[0]

  def input_named(self, name: str) -> Input:
    return next(i for i in self.inputs if i.name == name)

  def param_named(self, attr: str) -> Param:
    return next(p for p in self.params if p.attr == attr)

  @property
  def ops(self) -> tuple[Op, ...]:
    return self.pre + self.post

  @property
  def out_cols(self) -> int:
    """The size of the last dim of the value the ops see after the core (the row length)."""
    if self.core == "linear":
      return self.param_named(self.core_operand).shape[0]
    if self.core == "matmul":
      return self.input_named(self.core_operand).shape[1]
    return self.x.shape[-1]

  def structure(self) -> str:
    """The op structure that decides the split: kind, core and op names, aliases merged."""
    def names(ops):
      return ",".join(SPLIT_ALIASES.get(o.name, o.name) for o in ops)
    core = SPLIT_ALIASES.get(self.core, self.core) if self.core else "-"
    return f"{self.kind}:{names(self.pre)}>{core}>{names(self.post)}"

  def split(self) -> str:
    return split_of_structure(self.structure())

  def apis(self) -> frozenset[str]:
    """The Proposer's catalog APIs that the rendered module's forward calls."""
    def op_apis(o: Op) -> tuple[str, ...]:
      if o.name == "add_const" and o.consts[0] < 0:
        return ("sub",)  # render.py writes x - |c|
      return CATALOG_APIS[o.name]
    core = CATALOG_APIS[self.core] if self.core else ()
    return frozenset(core).union(*(op_apis(o) for o in self.ops))

  def describe(self) -> str:
    """A short human-readable name, e.g. 'linear+relu+add[row]'."""
    def op_text(o: Op) -> str:
      return f"{o.name}[{o.operand.kind}]" if o.operand else o.name
    parts = [op_text(o) for o in self.pre]
    if self.core:
      parts.append(self.core + ("_keepdim" if self.keepdim else ""))
    parts += [op_text(o) for o in self.post]
    return "+".join(parts)


def split_of_structure(structure: str) -> str:
  """'heldout' for HELDOUT_PERCENT% of structures (by a stable hash), 'train' for the rest."""
  bucket = int(hashlib.sha256(structure.encode()).hexdigest()[:8], 16) % 100
  return "heldout" if bucket < HELDOUT_PERCENT else "train"
