"""Symbolic evaluation of a Model's forward: which chain of family ops does it compute?

Every expression evaluates to a symbolic value: an input (`Leaf`), the chain built so far
(`Chain`), a constant, a parameter row, an nn.Linear, an activation module, or the (values,
indices) pair of torch.max/min over a dim. Anything else, or any combination that is not one
chain (a residual `x + relu(x)`, two reductions, ...), raises NotInFamily with the reason.
Pure Python: nothing of the module is executed.
"""

from __future__ import annotations

import ast
import dataclasses
import math
from typing import Any, Mapping

from kernelzero_jax.teacher import family
from kernelzero_jax.teacher.ast_utils import NotConstant, NotInFamily, canonical, const_eval, short
from kernelzero_jax.teacher.family import Op, Operand

_TORCH, _F, _NN = "torch.", "torch.nn.functional.", "torch.nn."


@dataclasses.dataclass(frozen=True)
class Leaf:
  """A forward input, nothing applied yet."""
  name: str
  shape: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Chain:
  """The chain computed so far from input `source`; `shape` is the current value's shape."""
  source: str
  shape: tuple[int, ...]
  pre: tuple[Op, ...] = ()
  core: str | None = None
  core_operand: str | None = None
  keepdim: bool = False
  post: tuple[Op, ...] = ()

  def apply(self, op: Op) -> "Chain":
    if self.core is None:
      return dataclasses.replace(self, pre=self.pre + (op,))
    if self.core in family.REDUCTIONS:
      raise NotInFamily(f"`{op.name}` after a reduction: the family applies ops only before "
                        "a reduction")
    return dataclasses.replace(self, post=self.post + (op,))

  def with_core(self, core: str, shape: tuple[int, ...], operand: str | None = None,
                keepdim: bool = False) -> "Chain":
    if self.core is not None:
      raise NotInFamily(f"{core} after {self.core}: the family has one reduction, softmax or "
                        "matmul per module")
    return dataclasses.replace(self, core=core, shape=shape, core_operand=operand,
                               keepdim=keepdim)


@dataclasses.dataclass(frozen=True)
class Const:
  value: Any


@dataclasses.dataclass(frozen=True)
class ParamRef:
  attr: str
  shape: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class LinearRef:
  attr: str
  in_features: int
  out_features: int


@dataclasses.dataclass(frozen=True)
class ModuleRef:
  """An activation module created in __init__ (nn.ReLU(), nn.Softmax(dim=1), ...)."""
  op: Op | None = None
  softmax: str | None = None
  dim: Any = None


@dataclasses.dataclass(frozen=True)
class MaxPair:
  """torch.max/min(x, dim): (values, indices); only the values are in the family."""
  values: Chain


# Unary ops by canonical function name (torch.*, F.* or a Tensor method): (op, [params
# after the input, with defaults]). A param named "inplace" is accepted and ignored.
_UNARY = {
    "relu": ("relu", {}), "sigmoid": ("sigmoid", {}), "tanh": ("tanh", {}), "exp": ("exp", {}),
    "abs": ("abs", {}), "neg": ("neg", {}), "negative": ("neg", {}), "square": ("square", {}),
    "silu": ("silu", {}), "gelu": ("gelu", {"approximate": "none"}),
    "leaky_relu": ("leaky_relu", {"negative_slope": 0.01}), "elu": ("elu", {"alpha": 1.0}),
    "hardtanh": ("hardtanh", {"min_val": -1.0, "max_val": 1.0}),
    "clamp": ("clamp", {"min": None, "max": None}), "clip": ("clamp", {"min": None, "max": None}),
    "softplus": ("softplus", {"beta": 1.0, "threshold": 20.0}),
}
# Activation modules: class -> the function it calls.
_MODULES = {"ReLU": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "SiLU": "silu", "GELU": "gelu",
            "LeakyReLU": "leaky_relu", "ELU": "elu", "Hardtanh": "hardtanh",
            "Softplus": "softplus"}
_BINARY = {"add": "add", "sub": "sub", "subtract": "sub", "mul": "mul", "multiply": "mul",
           "maximum": "maximum", "minimum": "minimum", "div": "div", "divide": "div",
           "true_divide": "div"}
_REDUCE = {"sum": "sum", "mean": "mean", "amax": "amax", "amin": "amin"}
_IDENTITY_METHODS = ("clone", "contiguous", "detach")


def make_unary(fn: str, args: Mapping[str, Any]) -> Op:
  """The Op for unary function `fn` called with bound constant arguments `args`."""
  op, _ = _UNARY[fn]
  if op == "gelu":
    approx = args["approximate"]
    if approx not in ("none", "tanh"):
      raise NotInFamily(f"gelu(approximate={approx!r})")
    return Op("gelu_tanh" if approx == "tanh" else "gelu")
  if op in ("leaky_relu", "elu"):
    return Op(op, (_number(args["negative_slope" if op == "leaky_relu" else "alpha"]),))
  if op == "hardtanh":
    return Op(op, (_number(args["min_val"]), _number(args["max_val"])))
  if op == "clamp":
    lo, hi = args["min"], args["max"]
    if lo is None and hi is None:
      raise NotInFamily("clamp without min or max")
    return Op(op, (-math.inf if lo is None else _number(lo),
                   math.inf if hi is None else _number(hi)))
  if op == "softplus":
    if _number(args["beta"]) != 1.0 or _number(args["threshold"]) != 20.0:
      raise NotInFamily("softplus with beta != 1 or threshold != 20")
  return Op(op)


def _number(v: Any) -> float:
  if isinstance(v, Const):
    v = v.value
  if isinstance(v, bool) or not isinstance(v, (int, float)):
    raise NotInFamily(f"expected a number, got {v!r}")
  return float(v)


def _symbolic(v: Any) -> Any:
  """A bound argument back as a symbolic value (bind unwraps constants)."""
  return v if isinstance(v, (Leaf, Chain, ParamRef, Const)) else Const(v)


def module_ref(cls: str, args: Mapping[str, Any]) -> ModuleRef:
  """The ModuleRef of nn.<cls>(**args), for the activation and softmax modules."""
  if cls in ("Softmax", "LogSoftmax"):
    return ModuleRef(softmax="softmax" if cls == "Softmax" else "log_softmax", dim=args.get("dim"))
  return ModuleRef(op=make_unary(_MODULES[cls], args))


def module_params(cls: str) -> dict[str, Any] | None:
  """Constructor parameters (with defaults) of a supported nn module class, or None."""
  if cls in ("Softmax", "LogSoftmax"):
    return {"dim": None}
  if cls in _MODULES:
    return dict(_UNARY[_MODULES[cls]][1])
  return None


def bind(call: ast.Call, params: Mapping[str, Any], evaluate, skip_first: int = 0
         ) -> dict[str, Any]:
  """Binds a call's arguments (after the first `skip_first` positional ones) to `params` like
  Python would, filling defaults; `evaluate` turns an argument node into a value."""
  names = list(params)
  out = dict(params)
  positional = call.args[skip_first:]
  if any(isinstance(a, ast.Starred) for a in call.args):
    raise NotInFamily(f"star-arguments in `{short(call)}`")
  if len(positional) > len(names):
    raise NotInFamily(f"unexpected arguments in `{short(call)}`")
  for name, node in zip(names, positional):
    out[name] = evaluate(node)
  for kw in call.keywords:
    if kw.arg == "inplace":
      continue
    if kw.arg not in params:
      raise NotInFamily(f"argument `{kw.arg}` of `{short(call)}` is outside the family")
    out[kw.arg] = evaluate(kw.value)
  out.pop("inplace", None)
  return {k: (v.value if isinstance(v, Const) else v) for k, v in out.items()}


class ForwardEvaluator:
  """Evaluates forward's statements over symbolic values."""

  def __init__(self, aliases: Mapping[str, str], constants: Mapping[str, Any],
               attrs: Mapping[str, Any], inputs: Mapping[str, tuple[int, ...]]):
    self.aliases = aliases
    self.constants = constants
    self.attrs = attrs
    self.env: dict[str, Any] = {name: Leaf(name, shape) for name, shape in inputs.items()}

  def run(self, fn: ast.FunctionDef) -> Chain:
    for stmt in fn.body:
      if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        continue  # docstring
      if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
          stmt.targets[0], ast.Name):
        self.env[stmt.targets[0].id] = self.eval(stmt.value)
      elif isinstance(stmt, ast.Return) and stmt.value is not None:
        result = self.eval(stmt.value)
        if isinstance(result, Leaf):
          raise NotInFamily("forward returns an input unchanged")
        if not isinstance(result, Chain):
          raise NotInFamily(f"forward returns `{short(stmt.value)}`, not a tensor of the chain")
        return result
      else:
        raise NotInFamily(f"forward has a statement outside the family: `{short(stmt)}`")
    raise NotInFamily("forward does not end with `return <tensor>`")

  # ---- expressions ---------------------------------------------------------------------------

  def eval(self, node: ast.AST) -> Any:
    if isinstance(node, ast.Name):
      if node.id in self.env:
        return self.env[node.id]
      return self._const(node)
    if isinstance(node, ast.Constant):
      return Const(node.value)
    if isinstance(node, ast.Attribute):
      return self._attribute(node)
    if isinstance(node, ast.UnaryOp):
      v = self.eval(node.operand)
      if isinstance(node.op, ast.USub):
        if isinstance(v, Const):
          _number(v)  # a number, not a string or a tuple
          return Const(-v.value)  # keeps ints ints: dim=-1
        return self._chain(v).apply(Op("neg"))
      if isinstance(node.op, ast.UAdd):
        return v
      raise NotInFamily(f"`{short(node)}`")
    if isinstance(node, ast.BinOp):
      ops = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow",
             ast.MatMult: "matmul"}
      if type(node.op) not in ops:
        raise NotInFamily(f"operator in `{short(node)}` is outside the family")
      name = ops[type(node.op)]
      if name == "matmul":
        return self._matmul(self.eval(node.left), self.eval(node.right))
      return self._binary(name, self.eval(node.left), self.eval(node.right))
    if isinstance(node, ast.Subscript):
      return self._subscript(node)
    if isinstance(node, ast.Call):
      return self._call(node)
    raise NotInFamily(f"`{short(node)}` is outside the family")

  def _const(self, node: ast.AST) -> Const:
    try:
      return Const(const_eval(node, self.constants, self.aliases))
    except NotConstant as e:
      raise NotInFamily(f"`{short(node)}` is neither an input, a parameter nor a constant") from e

  def _attribute(self, node: ast.Attribute) -> Any:
    if isinstance(node.value, ast.Name) and node.value.id == "self":
      if node.attr not in self.attrs:
        raise NotInFamily(f"self.{node.attr} is not set in __init__ (or not understood)")
      return self.attrs[node.attr]
    base = self.eval(node.value) if not canonical(node, self.aliases) else None
    if isinstance(base, MaxPair) and node.attr == "values":
      return base.values
    if base is None:
      return self._const(node)
    raise NotInFamily(f"`{short(node)}` is outside the family")

  def _subscript(self, node: ast.Subscript) -> Any:
    base = self.eval(node.value)
    if isinstance(base, MaxPair):
      index = self._const(node.slice).value
      if index == 0:
        return base.values
      raise NotInFamily("uses the indices of torch.max/min (an argmax/argmin)")
    raise NotInFamily(f"indexing `{short(node)}` is outside the family")

  @staticmethod
  def _chain(v: Any) -> Chain:
    if isinstance(v, Leaf):
      return Chain(v.name, v.shape)
    if isinstance(v, Chain):
      return v
    raise NotInFamily(f"an op applied to {type(v).__name__.lower()}, not to a tensor of the chain")

  # ---- binary arithmetic ---------------------------------------------------------------------

  def _binary(self, name: str, a: Any, b: Any) -> Any:
    if isinstance(a, Const) and isinstance(b, Const):
      fn = {"add": lambda p, q: p + q, "sub": lambda p, q: p - q, "mul": lambda p, q: p * q,
            "div": lambda p, q: p / q, "pow": lambda p, q: p ** q, "maximum": max,
            "minimum": min}[name]
      try:
        return Const(fn(_number(a), _number(b)))
      except (ZeroDivisionError, OverflowError) as e:
        raise NotInFamily(f"constant arithmetic fails: {e}") from e
    if isinstance(b, Const):
      return self._with_constant(name, self._chain(a), _number(b))
    if isinstance(a, Const):
      c, chain = _number(a), self._chain(b)
      if name in ("add", "mul", "maximum", "minimum"):
        return self._with_constant(name, chain, c)
      if name == "sub":
        return chain.apply(Op("neg")).apply(Op("add_const", (c,)))
      raise NotInFamily(f"a constant {'divided' if name == 'div' else 'raised'} by a tensor")
    if name in ("div", "pow"):
      raise NotInFamily(f"{'division' if name == 'div' else 'power'} by a tensor")
    return self._two_tensors(name, a, b)

  @staticmethod
  def _with_constant(name: str, chain: Chain, c: float) -> Chain:
    if name == "add":
      return chain.apply(Op("add_const", (c,)))
    if name == "sub":
      return chain.apply(Op("add_const", (-c,)))
    if name == "mul":
      return chain.apply(Op("scale", (c,)))
    if name == "div":
      if c == 0:
        raise NotInFamily("division by zero")
      return chain.apply(Op("scale", (1.0 / c,)))
    if name == "pow":
      if c == 2:
        return chain.apply(Op("square"))
      raise NotInFamily(f"power {c:g} (only squares are in the family)")
    if name == "maximum":
      return chain.apply(Op("clamp", (c, math.inf)))
    return chain.apply(Op("clamp", (-math.inf, c)))

  def _two_tensors(self, name: str, a: Any, b: Any) -> Chain:
    """A binary op of two tensors: the chain and an operand (input or parameter row)."""
    commutes = name in ("add", "mul", "maximum", "minimum")
    # The same value twice, or the silu pattern x * sigmoid(x).
    if isinstance(a, (Leaf, Chain)) and isinstance(b, (Leaf, Chain)):
      ca, cb = self._chain(a), self._chain(b)
      if ca == cb:
        if name == "mul":
          return ca.apply(Op("square"))
        if name == "add":
          return ca.apply(Op("scale", (2.0,)))
        raise NotInFamily(f"{name} of a tensor with itself")
      if name == "mul":
        for p, q in ((ca, cb), (cb, ca)):
          if q == p.apply(Op("sigmoid")):
            return p.apply(Op("silu"))
    main, other, swapped = a, b, False
    if isinstance(a, ParamRef) or (isinstance(a, Leaf) and isinstance(b, Chain)):
      main, other, swapped = b, a, True
    chain = self._chain(main)
    operand = self._operand(chain, other)
    if swapped and not commutes:  # other - chain = -(chain) + other
      return chain.apply(Op("neg")).apply(Op("add", operand=operand))
    return chain.apply(Op(name, operand=operand))

  @staticmethod
  def _operand(chain: Chain, other: Any) -> Operand:
    if isinstance(other, ParamRef):
      n = chain.shape[-1]
      if other.shape[-1:] != (n,) or any(d != 1 for d in other.shape[:-1]) or len(
          other.shape) > len(chain.shape):
        raise NotInFamily(f"parameter self.{other.attr} of shape {other.shape} does not broadcast "
                          f"as a row over a value of shape {chain.shape}")
      return Operand("row", other.attr)
    if isinstance(other, Leaf):
      if other.name == chain.source:
        raise NotInFamily("combines the input with a value computed from it (a residual): the "
                          "family is a single chain")
      if other.shape != chain.shape:
        raise NotInFamily(f"input {other.name} of shape {other.shape} is not the shape "
                          f"{chain.shape} of the value it is combined with")
      return Operand("input", other.name)
    if isinstance(other, Chain):
      raise NotInFamily("combines two computed values (e.g. a residual): the family is a "
                        "single chain")
    raise NotInFamily(f"a binary op with {type(other).__name__.lower()}")

  # ---- calls ---------------------------------------------------------------------------------

  def _call(self, node: ast.Call) -> Any:
    func = node.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
        func.value.id == "self":
      return self._call_attr(node, self._attribute(func))
    name = canonical(func, self.aliases)
    if name is not None:
      return self._call_function(node, name)
    if isinstance(func, ast.Attribute):  # a Tensor method: value.method(...)
      value = self.eval(func.value)
      return self._call_method(node, func.attr, value)
    raise NotInFamily(f"call `{short(node)}` is outside the family")

  def _call_attr(self, node: ast.Call, target: Any) -> Any:
    if len(node.args) != 1 or node.keywords:
      raise NotInFamily(f"`{short(node)}`: a module called with other than one input")
    x = self.eval(node.args[0])
    if isinstance(target, LinearRef):
      if not isinstance(x, Leaf) or len(x.shape) != 2:
        raise NotInFamily("nn.Linear applied to something other than a 2-D forward input "
                          "(the family's matmul comes first, on a 2-D input)")
      if x.shape[1] != target.in_features:
        raise NotInFamily(f"nn.Linear({target.in_features}, ...) applied to shape {x.shape}")
      return self._chain(x).with_core("linear", (x.shape[0], target.out_features), target.attr)
    if isinstance(target, ModuleRef):
      if target.op is not None:
        return self._chain(x).apply(target.op)
      return self._softmax(target.softmax, self._chain(x), target.dim)
    raise NotInFamily(f"calls self.{ast.unparse(node.func).split('.', 1)[1]}, which is not an "
                      "activation or nn.Linear")

  def _call_function(self, node: ast.Call, name: str) -> Any:
    for prefix in (_F, _TORCH):
      if name.startswith(prefix) and "." not in name[len(prefix):]:
        short_name = name[len(prefix):]
        if not node.args:
          raise NotInFamily(f"`{short(node)}` without a tensor argument")
        return self._tensor_fn(node, short_name, self.eval(node.args[0]), skip_first=1)
    if name in ("torch.linalg.norm", "torch.linalg.vector_norm"):
      return self._norm(node, self.eval(node.args[0]), linalg=True)
    raise NotInFamily(f"`{name}` is outside the family")

  def _call_method(self, node: ast.Call, method: str, value: Any) -> Any:
    if method in _IDENTITY_METHODS and not node.args and not node.keywords:
      return value
    return self._tensor_fn(node, method, value, skip_first=0)

  def _tensor_fn(self, node: ast.Call, fn: str, x: Any, skip_first: int) -> Any:
    """torch.fn(x, ...), F.fn(x, ...) or x.fn(...): everything after x is bound by name."""
    ev = self.eval
    if fn in _UNARY:
      args = bind(node, _UNARY[fn][1], ev, skip_first)
      return self._chain(x).apply(make_unary(fn, args))
    if fn in ("max", "min"):
      # torch.max(x, other) is elementwise; torch.max(x, dim) reduces over dim.
      rest = node.args[skip_first:]
      if "other" in {k.arg for k in node.keywords} or (rest and not isinstance(ev(rest[0]), Const)):
        other = bind(node, {"other": None}, ev, skip_first)["other"]
        return self._binary("maximum" if fn == "max" else "minimum", x, _symbolic(other))
      args = bind(node, {"dim": None, "keepdim": False}, ev, skip_first)
      return MaxPair(self._reduce(self._chain(x), fn, args["dim"], args["keepdim"]))
    if fn in _BINARY:
      args = bind(node, {"other": None, "alpha": 1}, ev, skip_first)
      if args["alpha"] != 1:
        raise NotInFamily(f"{fn}(..., alpha={args['alpha']})")
      return self._binary(_BINARY[fn], x, _symbolic(args["other"]))
    if fn in ("pow", "float_power"):
      args = bind(node, {"exponent": None}, ev, skip_first)
      return self._binary("pow", x, Const(args["exponent"]))
    if fn in _REDUCE:
      args = bind(node, {"dim": None, "keepdim": False, "dtype": None}, ev, skip_first)
      if args["dtype"] is not None:
        raise NotInFamily(f"{fn} with a dtype")
      return self._reduce(self._chain(x), _REDUCE[fn], args["dim"], args["keepdim"])
    if fn == "norm":
      return self._norm(node, x, linalg=False, skip_first=skip_first)
    if fn == "sqrt":
      return self._sqrt(self._chain(x))
    if fn in ("softmax", "log_softmax"):
      args = bind(node, {"dim": None, "dtype": None} if skip_first == 0 else
                  {"dim": None, "_stacklevel": 3, "dtype": None}, ev, skip_first)
      if args["dtype"] is not None:
        raise NotInFamily(f"{fn} with a dtype")
      return self._softmax(fn, self._chain(x), args["dim"])
    if fn in ("matmul", "mm"):
      args = bind(node, {"other": None}, ev, skip_first)
      return self._matmul(x, args["other"])
    raise NotInFamily(f"`{fn}` is outside the family's ops")

  # ---- cores ---------------------------------------------------------------------------------

  @staticmethod
  def _last_dim(chain: Chain, dim: Any, what: str) -> None:
    if isinstance(dim, tuple) and len(dim) == 1:
      dim = dim[0]
    rank = len(chain.shape)
    if dim is None:
      raise NotInFamily(f"{what} without a dim (over all dims)")
    if isinstance(dim, bool) or not isinstance(dim, int) or dim not in (-1, rank - 1):
      raise NotInFamily(f"{what} over dim {dim!r} of a rank-{rank} value: the family reduces "
                        "over the last dim only")

  def _reduce(self, chain: Chain, core: str, dim: Any, keepdim: Any) -> Chain:
    self._last_dim(chain, dim, core)
    if not isinstance(keepdim, bool):
      raise NotInFamily(f"keepdim={keepdim!r}")
    shape = chain.shape[:-1] + ((1,) if keepdim else ())
    return chain.with_core(core, shape, keepdim=keepdim)

  def _norm(self, node: ast.Call, x: Any, linalg: bool, skip_first: int = 1) -> Chain:
    params = ({"ord": None, "dim": None, "keepdim": False, "dtype": None} if linalg else
              {"p": "fro", "dim": None, "keepdim": False, "out": None, "dtype": None})
    args = bind(node, params, self.eval, skip_first)
    p = args["ord" if linalg else "p"]
    if p not in (None, 2, 2.0, "fro") or args["dtype"] is not None:
      raise NotInFamily(f"norm of order {p!r} (only the L2 norm is in the family)")
    return self._reduce(self._chain(x), "l2norm", args["dim"], args["keepdim"])

  @staticmethod
  def _sqrt(chain: Chain) -> Chain:
    if chain.core in ("mean", "sum") and chain.pre and chain.pre[-1].name == "square":
      return dataclasses.replace(chain, pre=chain.pre[:-1],
                                 core="rms" if chain.core == "mean" else "l2norm")
    raise NotInFamily("sqrt outside the root-mean-square / L2-norm patterns")

  def _softmax(self, which: str, chain: Chain, dim: Any) -> Chain:
    self._last_dim(chain, dim, which)
    return chain.with_core(which, chain.shape)

  def _matmul(self, a: Any, b: Any) -> Chain:
    if not isinstance(a, Leaf) or not isinstance(b, Leaf):
      raise NotInFamily("matmul of other than two forward inputs (the family's matmul comes "
                        "first, on the inputs)")
    if len(a.shape) != 2 or len(b.shape) != 2 or a.shape[1] != b.shape[0]:
      raise NotInFamily(f"matmul of shapes {a.shape} and {b.shape}: only 2-D (M, K) @ (K, N)")
    return self._chain(a).with_core("matmul", (a.shape[0], b.shape[1]), b.name)
