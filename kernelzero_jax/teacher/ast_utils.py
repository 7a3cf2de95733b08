"""AST helpers for reading module sources without running them: import aliases, canonical dotted
names and a small evaluator for constant expressions (sizes, scales, get_init_inputs values).

The teacher runs in the trainer's process, which never executes generated code, so everything it
learns about a module comes from here. Pure Python: no torch here.
"""

from __future__ import annotations

import ast
import math
from typing import Any, Mapping

from kernelzero_jax.sandbox.static_checks import dotted_name


class NotInFamily(ValueError):
  """The module is outside the family the teacher understands; `reason` says why."""

  def __init__(self, reason: str):
    super().__init__(reason)
    self.reason = reason


class NotConstant(Exception):
  """An expression is not a compile-time constant."""


def import_aliases(tree: ast.Module) -> dict[str, str]:
  """Local name -> the dotted name it stands for ('F' -> 'torch.nn.functional')."""
  aliases = {"torch": "torch", "math": "math"}
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for a in node.names:
        if a.asname:
          aliases[a.asname] = a.name
        else:
          root = a.name.split(".")[0]
          aliases[root] = root
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      for a in node.names:
        aliases[a.asname or a.name] = f"{node.module}.{a.name}"
  return aliases


dotted = dotted_name  # "a.b.c" of an attribute chain, as the sandbox's checks read it


def canonical(node: ast.AST, aliases: Mapping[str, str]) -> str | None:
  """'F.gelu' -> 'torch.nn.functional.gelu' (None when the root is not an imported name)."""
  name = dotted(node)
  if name is None:
    return None
  root, _, rest = name.partition(".")
  if root not in aliases:
    return None
  full = aliases[root] + ("." + rest if rest else "")
  return full.replace("torch.nn.modules.activation.", "torch.nn.")


_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
           ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b,
           ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
           ast.Pow: lambda a, b: a ** b}
_MATH_FUNCS = {"math.sqrt": math.sqrt, "math.exp": math.exp, "math.log": math.log,
               "math.tanh": math.tanh}
_MATH_CONSTS = {"math.pi": math.pi, "math.e": math.e, "math.inf": math.inf}


def const_eval(node: ast.AST, env: Mapping[str, Any], aliases: Mapping[str, str]) -> Any:
  """Value of a constant expression: literals, names in `env`, arithmetic, tuples, math.*.

  Raises NotConstant for anything else. Only numbers, strings, bools, None and tuples come out.
  """
  if isinstance(node, ast.Constant):
    if isinstance(node.value, (int, float, str, bool, type(None))):
      return node.value
    raise NotConstant(ast.unparse(node))
  if isinstance(node, ast.Name):
    if node.id in env:
      return env[node.id]
    raise NotConstant(node.id)
  if isinstance(node, (ast.Tuple, ast.List)):
    return tuple(const_eval(e, env, aliases) for e in node.elts)
  if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
    v = const_eval(node.operand, env, aliases)
    if not isinstance(v, (int, float)) or isinstance(v, bool):
      raise NotConstant(ast.unparse(node))
    return -v if isinstance(node.op, ast.USub) else v
  if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
    a, b = const_eval(node.left, env, aliases), const_eval(node.right, env, aliases)
    if isinstance(node.op, ast.Pow) and (not isinstance(b, (int, float)) or abs(b) > 64):
      raise NotConstant(ast.unparse(node))
    try:
      return _BINOPS[type(node.op)](a, b)
    except (TypeError, ZeroDivisionError, OverflowError) as e:
      raise NotConstant(ast.unparse(node)) from e
  if isinstance(node, ast.Attribute):
    name = canonical(node, aliases)
    if name in _MATH_CONSTS:
      return _MATH_CONSTS[name]
    raise NotConstant(ast.unparse(node))
  if isinstance(node, ast.Call) and not node.keywords and len(node.args) == 1:
    fn = canonical(node.func, aliases) if not isinstance(node.func, ast.Name) else node.func.id
    if fn in ("float", "int"):
      v = const_eval(node.args[0], env, aliases)
      try:
        return float(v) if fn == "float" else int(v)
      except (TypeError, ValueError) as e:
        raise NotConstant(ast.unparse(node)) from e
    if fn in _MATH_FUNCS:
      try:
        return _MATH_FUNCS[fn](const_eval(node.args[0], env, aliases))
      except (TypeError, ValueError, OverflowError) as e:
        raise NotConstant(ast.unparse(node)) from e
  raise NotConstant(ast.unparse(node)[:80])


def module_constants(tree: ast.Module, aliases: Mapping[str, str]) -> dict[str, Any]:
  """Top-level `NAME = constant expression` assignments, evaluated in order."""
  env: dict[str, Any] = {}
  for node in tree.body:
    if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
      names = [t.id for t in node.targets]  # `a = b = 128` binds both
      try:
        value = const_eval(node.value, env, aliases)
        env.update((n, value) for n in names)
      except NotConstant:
        for n in names:
          env.pop(n, None)
  return env


def is_docstring(stmt: ast.stmt) -> bool:
  return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
          and isinstance(stmt.value.value, str))


def short(node: ast.AST, limit: int = 70) -> str:
  text = ast.unparse(node)
  return text if len(text) <= limit else text[:limit - 3] + "..."
