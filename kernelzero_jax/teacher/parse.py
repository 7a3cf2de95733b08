"""Understanding a module from its source: `understand(source) -> ModuleSpec` or NotInFamily.

The teacher runs in the trainer's process, which must never run generated code, so the module is
read, not executed: the AST of its imports, module-level constants, `get_inputs` (whose tensors
must be `torch.randn(...)` / `torch.rand(...)` of constant sizes), `get_init_inputs` (constants),
`Model.__init__` (nn.Linear, nn.Parameter(torch.randn(...)), activation modules and constants)
and `Model.forward` (parse_forward.py). Whatever falls outside the family raises NotInFamily with
the reason; nothing else is raised for any source text.
"""

from __future__ import annotations

import ast
from typing import Any

from kernelzero_jax.teacher import parse_forward as fwd
from kernelzero_jax.teacher.ast_utils import (NotConstant, NotInFamily, canonical, const_eval,
                                              import_aliases, is_docstring, module_constants,
                                              short)
from kernelzero_jax.teacher.family import Input, ModuleSpec, Param

__all__ = ["NotInFamily", "understand"]

_FACTORIES = ("torch.randn", "torch.rand", "torch.zeros", "torch.ones")


def understand(source: str) -> ModuleSpec:
  """The ModuleSpec that `source` (a KernelBench-format module) computes, or NotInFamily."""
  try:
    return _understand(source)
  except NotInFamily:
    raise
  except RecursionError as e:
    raise NotInFamily("the source is nested too deeply to read") from e
  except (ValueError, TypeError, KeyError, IndexError, AttributeError, ArithmeticError) as e:
    # A construct the readers did not foresee; still a verdict about the family, not a crash.
    raise NotInFamily(f"not understood: {type(e).__name__}: {e}") from e


def _understand(source: str) -> ModuleSpec:
  try:
    tree = ast.parse(source)
  except SyntaxError as e:
    raise NotInFamily(f"syntax error at line {e.lineno}: {e.msg}") from e
  aliases = import_aliases(tree)
  constants = module_constants(tree, aliases)
  # The last definition wins, as when the module runs.
  model = next((n for n in reversed(tree.body) if isinstance(n, ast.ClassDef)
                and n.name == "Model"), None)
  if model is None:
    raise NotInFamily("no class Model")
  methods = {n.name: n for n in model.body if isinstance(n, ast.FunctionDef)}
  if "forward" not in methods:
    raise NotInFamily("Model has no forward")
  functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
  for name in ("get_inputs", "get_init_inputs"):
    if name not in functions:
      raise NotInFamily(f"no {name}()")
  inputs = _read_get_inputs(functions["get_inputs"], aliases, constants)
  init_values = _read_list(functions["get_init_inputs"], aliases, constants, "get_init_inputs")
  init = _InitReader(aliases, constants)
  if "__init__" in methods:
    init.read(methods["__init__"], init_values)

  forward = methods["forward"]
  arg_names = _plain_args(forward, "forward")
  if len(arg_names) != len(inputs):
    raise NotInFamily(f"forward takes {len(arg_names)} inputs but get_inputs returns "
                      f"{len(inputs)}")
  shapes = {name: shape for name, (shape, _) in zip(arg_names, inputs)}
  chain = fwd.ForwardEvaluator(aliases, constants, init.attrs, shapes).run(forward)
  if chain.source != arg_names[0]:
    raise NotInFamily(f"the chain starts from `{chain.source}`, not from the first input")
  return _spec(chain, arg_names, inputs, init, init_values)


def _spec(chain: fwd.Chain, arg_names: list[str], inputs: list[tuple[tuple[int, ...], str]],
          init: "_InitReader", init_values: tuple) -> ModuleSpec:
  if chain.core is None:
    kind = "elementwise"
    if not chain.pre:
      raise NotInFamily("forward computes nothing")
  elif chain.core in ("linear", "matmul"):
    kind = "matmul"
    if chain.pre:
      raise NotInFamily("ops before the matmul (the family's matmul comes first)")
  elif chain.core in ("softmax", "log_softmax"):
    kind = "softmax"
  else:
    kind = "reduction"
  spec_inputs = tuple(Input(n, shape, dist) for n, (shape, dist) in zip(arg_names, inputs))
  return ModuleSpec(kind=kind, inputs=spec_inputs, pre=chain.pre, core=chain.core,
                    core_operand=chain.core_operand, keepdim=chain.keepdim, post=chain.post,
                    params=tuple(init.params), init_signature=init.signature,
                    init_values=tuple(init_values))


def _plain_args(fn: ast.FunctionDef, what: str) -> list[str]:
  a = fn.args
  if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
    raise NotInFamily(f"{what} takes *args, **kwargs or keyword-only arguments")
  names = [x.arg for x in a.args]
  if not names or names[0] != "self":
    raise NotInFamily(f"{what} is not a plain method")
  if what == "forward" and a.defaults:
    raise NotInFamily("forward has default arguments")
  return names[1:]


def _returned_list(fn: ast.FunctionDef, what: str) -> tuple[list[ast.AST], dict[str, ast.AST]]:
  """The element nodes of `return [..]` and the function's `name = expr` assignments."""
  local: dict[str, ast.AST] = {}
  for stmt in fn.body:
    if is_docstring(stmt):
      continue
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
        stmt.targets[0], ast.Name):
      local[stmt.targets[0].id] = stmt.value
    elif isinstance(stmt, ast.Return) and isinstance(stmt.value, (ast.List, ast.Tuple)):
      return list(stmt.value.elts), local
    else:
      raise NotInFamily(f"{what}() is not a list of constants or tensors: `{short(stmt)}`")
  raise NotInFamily(f"{what}() does not return a list")


def _read_list(fn: ast.FunctionDef, aliases, constants, what: str) -> tuple:
  elements, local = _returned_list(fn, what)
  env = dict(constants)
  for name, node in local.items():
    try:
      env[name] = const_eval(node, env, aliases)
    except NotConstant:
      pass
  try:
    return tuple(const_eval(e, env, aliases) for e in elements)
  except NotConstant as e:
    raise NotInFamily(f"{what}() returns `{e}`, which is not a constant") from e


def _read_get_inputs(fn: ast.FunctionDef, aliases, constants) -> list[tuple[tuple[int, ...], str]]:
  """(shape, distribution) of every tensor get_inputs() returns."""
  elements, local = _returned_list(fn, "get_inputs")
  out = []
  for e in elements:
    node = local.get(e.id, e) if isinstance(e, ast.Name) else e
    out.append(_random_tensor(node, aliases, constants))
  return out


def _random_tensor(node: ast.AST, aliases, constants) -> tuple[tuple[int, ...], str]:
  if not isinstance(node, ast.Call) or canonical(node.func, aliases) not in (
      "torch.randn", "torch.rand"):
    raise NotInFamily(f"get_inputs() returns `{short(node)}`, not torch.randn/rand(...) (only "
                      "float32 tensors are in the family)")
  if node.keywords:
    raise NotInFamily(f"get_inputs() tensor with keyword arguments: `{short(node)}`")
  shape = _shape(node.args, aliases, constants)
  return shape, canonical(node.func, aliases).split(".")[-1]


def _shape(args: list[ast.AST], aliases, env) -> tuple[int, ...]:
  try:
    dims = []
    for a in args:
      if isinstance(a, ast.Starred):
        dims.extend(const_eval(a.value, env, aliases))
      else:
        v = const_eval(a, env, aliases)
        dims.extend(v if isinstance(v, tuple) else (v,))
  except (NotConstant, TypeError) as e:
    raise NotInFamily(f"a tensor size is not a constant: {e}") from e
  if not dims or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims):
    raise NotInFamily(f"tensor sizes {dims} are not positive integers")
  return tuple(dims)


class _InitReader:
  """Reads Model.__init__: the parameters it creates (in order), its activation modules and its
  constant attributes, with the constructor arguments bound to get_init_inputs' values."""

  def __init__(self, aliases, constants):
    self.aliases = aliases
    self.constants = constants
    self.attrs: dict[str, Any] = {}
    self.params: list[Param] = []
    self.signature = ""
    self.arg_names: list[str] = []
    self.env: dict[str, Any] = {}

  def read(self, fn: ast.FunctionDef, values: tuple) -> None:
    self.arg_names = _plain_args(fn, "__init__")
    defaults = fn.args.defaults
    first_default = len(self.arg_names) - len(defaults)
    if len(values) > len(self.arg_names) or len(values) < first_default:
      raise NotInFamily(f"get_init_inputs() gives {len(values)} values for the constructor's "
                        f"{len(self.arg_names)} arguments")
    self.env = dict(self.constants)
    parts = []
    for i, name in enumerate(self.arg_names):
      default = None
      if i >= first_default:
        try:
          default = const_eval(defaults[i - first_default], self.constants, self.aliases)
        except NotConstant as e:
          raise NotInFamily(f"constructor default `{e}` is not a constant") from e
        parts.append(f"{name}={default!r}")
      else:
        parts.append(name)
      self.env[name] = values[i] if i < len(values) else default
    self.signature = ", ".join(parts)
    for stmt in fn.body:
      self._statement(stmt)

  def _statement(self, stmt: ast.stmt) -> None:
    if is_docstring(stmt) or _is_super_init(stmt):
      return
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
      target = stmt.targets[0]
      if isinstance(target, ast.Name):
        self.env[target.id] = self._constant(stmt.value, f"`{short(stmt)}`")
        return
      if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
          and target.value.id == "self"):
        self.attrs[target.attr] = self._attr_value(target.attr, stmt.value)
        return
    raise NotInFamily(f"__init__ has a statement outside the family: `{short(stmt)}`")

  def _constant(self, node: ast.AST, what: str) -> Any:
    try:
      return const_eval(node, self.env, self.aliases)
    except NotConstant as e:
      raise NotInFamily(f"__init__: {what} is outside the family") from e

  def _attr_value(self, attr: str, node: ast.AST) -> Any:
    name = canonical(node.func, self.aliases) if isinstance(node, ast.Call) else None
    if name == "torch.nn.Linear":
      return self._linear(attr, node)
    if name == "torch.nn.Parameter":
      return self._parameter(attr, node)
    if name and name.startswith("torch.nn.") and name.count(".") == 2:
      params = fwd.module_params(name.split(".")[-1])
      if params is None:
        raise NotInFamily(f"__init__ creates {name.replace('torch.nn.', 'nn.')}, which is "
                          "outside the family")
      args = fwd.bind(node, params, lambda n: self._constant(n, f"`{short(n)}`"))
      return fwd.module_ref(name.split(".")[-1], args)
    return fwd.Const(self._constant(node, f"self.{attr} = `{short(node)}`"))

  def _linear(self, attr: str, node: ast.Call) -> fwd.LinearRef:
    bound = fwd.bind(node, {"in_features": None, "out_features": None, "bias": True,
                            "device": None, "dtype": None}, lambda n: n)
    if bound["device"] is not None or bound["dtype"] is not None:
      raise NotInFamily("nn.Linear with a device or dtype")
    n_in, n_out = (self._constant(bound[k], "nn.Linear's size") for k in ("in_features",
                                                                          "out_features"))
    bias = bound["bias"] if isinstance(bound["bias"], bool) else self._constant(
        bound["bias"], "nn.Linear's bias flag")
    if not (isinstance(n_in, int) and isinstance(n_out, int) and isinstance(bias, bool)):
      raise NotInFamily("nn.Linear with sizes or bias flag that are not constants")
    create = (f"nn.Linear({self._source(bound['in_features'])}, "
              f"{self._source(bound['out_features'])}{'' if bias else ', bias=False'})")
    self.params.append(Param(attr, "linear", (n_out, n_in), create, bias=bias))
    return fwd.LinearRef(attr, n_in, n_out)

  def _parameter(self, attr: str, node: ast.Call) -> fwd.ParamRef:
    if len(node.args) != 1 or node.keywords:
      raise NotInFamily(f"nn.Parameter form outside the family: `{short(node)}`")
    inner = node.args[0]
    factory = inner
    if isinstance(inner, ast.BinOp) and isinstance(inner.op, (ast.Mult, ast.Div)):
      self._constant(inner.right, "nn.Parameter's scale")
      factory = inner.left
    if not (isinstance(factory, ast.Call) and canonical(factory.func, self.aliases) in _FACTORIES
            and not factory.keywords):
      raise NotInFamily(f"nn.Parameter initialised by `{short(inner)}` (the family takes "
                        "torch.randn/rand/zeros/ones of constant sizes)")
    shape = _shape(factory.args, self.aliases, self.env)
    self.params.append(Param(attr, "tensor", shape, f"nn.Parameter({self._source(inner)})"))
    return fwd.ParamRef(attr, shape)

  def _source(self, node: ast.AST) -> str:
    """`node` as source that ModelNew's constructor can repeat verbatim: constructor arguments
    stay names, other names become their values, torch factories get their canonical names."""
    reader = self

    class Rewrite(ast.NodeTransformer):
      def visit_Call(self, call):  # pylint: disable=invalid-name
        # Only the arguments are rewritten: the callee is a torch factory (checked by the caller).
        name = canonical(call.func, reader.aliases) or ""
        call.args = [self.visit(a) for a in call.args]
        call.func = ast.Attribute(ast.Name("torch", ast.Load()), name.split(".")[-1], ast.Load())
        return call

      def visit_Name(self, n):  # pylint: disable=invalid-name
        if n.id in reader.arg_names:
          return n
        return ast.Constant(reader._constant(n, f"`{n.id}`"))  # pylint: disable=protected-access

    return ast.unparse(Rewrite().visit(ast.parse(ast.unparse(node), mode="eval")).body)


def _is_super_init(stmt: ast.stmt) -> bool:
  if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
    return False
  func = stmt.value.func
  return isinstance(func, ast.Attribute) and func.attr == "__init__"
