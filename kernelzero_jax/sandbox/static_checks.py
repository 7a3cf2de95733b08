"""Static (source-level) checks on a candidate, before anything of it runs.

These are the first of two layers. They reject whole classes of cheating that are visible in the
code: harness tampering (assigning into imported modules, dunder/introspection access, private
torch APIs), escape hatches (threads, processes, ctypes, foreign array libraries), torch.compile,
library GEMM/convolution calls from the CUDA source, and Triton kernel bodies that are not Triton.
The second layer (evidence.py, in the worker) watches what really runs, so that renaming and
`getattr` tricks that survive this file are still caught.

The checks are written against *capabilities*, not against example cheats, and honest kernels
only ever need: torch, torch.nn, torch.nn.functional (for its names, not its compute, which the
runtime layer rejects), triton, triton.language, math, typing and the load_inline helper.
Pure Python: no torch import here.
"""

from __future__ import annotations

import ast
import dataclasses
import re

# Top-level modules a candidate may import. Everything else (numpy, ctypes, threading, subprocess,
# importlib, sys, os, gc, inspect, ...) is a capability that honest kernel code does not need.
ALLOWED_IMPORT_ROOTS = frozenset({
    "torch", "triton", "math", "typing", "typing_extensions", "functools", "dataclasses",
    "__future__", "itertools", "operator", "collections", "enum", "abc",
})
# Submodules of allowed roots that are still forbidden.
FORBIDDEN_SUBMODULE_PREFIXES = (
    "torch._", "torch.multiprocessing", "torch.distributed", "torch.cuda.graphs", "torch.utils.data",
    "torch.utils.benchmark", "torch.utils.hooks", "torch.compiler", "torch.fx", "torch.jit",
    "torch.overrides", "torch.profiler", "torch.autograd.profiler", "torch.testing",
    "triton.testing", "triton.runtime", "triton.compiler", "triton.backends",
)
ALLOWED_TORCH_UTILS = ("torch.utils.cpp_extension",)

# Builtins that reach interpreter internals or the file system.
FORBIDDEN_BUILTINS = frozenset({
    "eval", "exec", "compile", "__import__", "globals", "locals", "vars", "open", "breakpoint",
    "setattr", "delattr", "input", "memoryview", "__builtins__", "exit", "quit",
})
# Attributes whose use means compiling, stream/graph games, host round trips or introspection.
FORBIDDEN_ATTRS = {
    "compile": "torch.compile / compilation is not the candidate's own kernel",
    "Stream": "launching work on another stream hides it from the timer",
    "ExternalStream": "launching work on another stream hides it from the timer",
    "stream": "launching work on another stream hides it from the timer",
    "set_stream": "launching work on another stream hides it from the timer",
    "CUDAGraph": "graph capture/replay is not allowed in a candidate",
    "graph": "graph capture/replay is not allowed in a candidate",
    "numpy": "host round trip: compute must run in the candidate's kernels",
    "from_numpy": "host round trip: compute must run in the candidate's kernels",
    "tolist": "host round trip: compute must run in the candidate's kernels",
    "cpu": "host round trip: compute must run in the candidate's kernels",
    "set_default_device": "changes harness state",
    "manual_seed": "changes harness state (random number generation)",
    "seed": "changes harness state (random number generation)",
    "manual_seed_all": "changes harness state (random number generation)",
    "default_generator": "changes harness state (random number generation)",
    "default_generators": "changes harness state (random number generation)",
    "set_rng_state": "changes harness state (random number generation)",
    "use_deterministic_algorithms": "changes harness state",
    "backends": "changes harness state (torch.backends flags)",
    "set_flush_denormal": "changes harness state",
    "set_per_process_memory_fraction": "changes harness state",
    "modules": "sys.modules / module introspection",
    "register_forward_hook": "hooks change what the harness observes",
    "register_forward_pre_hook": "hooks change what the harness observes",
    "register_module_forward_hook": "hooks change what the harness observes",
    "register_module_forward_pre_hook": "hooks change what the harness observes",
}
# Allowed modules re-export forbidden ones as attributes (torch.os, torch.sys, typing.sys,
# torch.nn.functional.np, dataclasses.inspect, ...). Reaching any of these names as an attribute
# is the same capability as importing it.
FORBIDDEN_MODULE_ATTRS = frozenset({
    "os", "sys", "ctypes", "threading", "_thread", "builtins", "subprocess", "importlib",
    "inspect", "multiprocessing", "np", "numpy", "gc", "socket", "signal", "shutil", "pickle",
    "marshal", "io", "pathlib", "tempfile", "glob", "resource", "platform", "types", "weakref",
    "code", "codeop", "runpy", "pdb", "traceback", "linecache", "atexit", "faulthandler", "mmap",
    "select", "asyncio", "concurrent", "cffi", "cupy", "jax", "scipy", "attrgetter",
    "methodcaller", "system", "popen", "getppid", "environ", "putenv",
})
# Dunder attributes that honest code uses. Any other `__x__` access is introspection.
ALLOWED_DUNDER_ATTRS = frozenset({"__init__", "__name__", "__class__"})

# Harness-visible names whose reassignment is tampering even without a module prefix.
_MODULE_ROOTS_FOR_ASSIGN = ("torch", "triton", "tl", "math", "nn", "F", "time", "functools")

# CUDA/C++ source: calls that run library kernels (not the candidate's own), or that escape the
# timer (streams, threads, processes) or the dispatcher (at::native).
CUDA_FORBIDDEN_PATTERNS = [
    (re.compile(r"\bcublas\w*|cublasLt\w*"), "calls cuBLAS instead of its own kernel"),
    (re.compile(r"\bcudnn\w*"), "calls cuDNN instead of its own kernel"),
    (re.compile(r"\bcufft\w*|\bcusparse\w*|\bcusolver\w*"), "calls a CUDA math library instead of its own kernel"),
    (re.compile(r"\bat::native::"), "calls ATen native kernels directly"),
    (re.compile(r"\bat::cuda::blas\b|\bat::blas\b"), "calls ATen's BLAS wrappers"),
    (re.compile(r"\b(?:torch|at)::(?:matmul|mm|bmm|addmm|baddbmm|linear|conv\w*|einsum|tensordot|"
                r"softmax|log_softmax|layer_norm|group_norm|batch_norm|instance_norm)\s*\("),
     "calls a torch compute op from C++ instead of its own kernel"),
    (re.compile(r"\bcudaStreamCreate\w*|\bcudaStreamBeginCapture\b|\bcudaGraph\w*"),
     "creates streams or graphs: work on a side stream hides from the timer"),
    (re.compile(r"\bgetStreamFromPool\b"), "takes a side stream from the pool"),
    (re.compile(r"\bstd::thread\b|\bstd::async\b|\bstd::jthread\b|\bpthread_create\b"),
     "starts threads"),
    (re.compile(r"\bfork\s*\(|\bvfork\s*\(|\bpopen\s*\(|\bsystem\s*\(|\bexecv\w*\s*\(|\bdlopen\s*\("),
     "starts processes or loads libraries"),
    (re.compile(r"\bcudaDeviceSetLimit\b|\bcudaSetDevice\b|\bcudaDeviceReset\b"),
     "changes device state"),
    # The CUDA prebuilder loads the extension with no GPU visible (CUDA_VISIBLE_DEVICES empty,
    # read when the driver starts): code run at load that changed the variable first would get
    # the GPU, beside other judges' timings.
    (re.compile(r"\b(?:setenv|putenv|unsetenv|clearenv)\s*\(|\benviron\b"),
     "changes the process's environment"),
]



@dataclasses.dataclass
class StaticReport:
  format_errors: list[str] = dataclasses.field(default_factory=list)
  rejections: list[str] = dataclasses.field(default_factory=list)
  cuda_kernel_names: list[str] = dataclasses.field(default_factory=list)
  triton_kernel_names: list[str] = dataclasses.field(default_factory=list)

  @property
  def ok(self) -> bool:
    return not self.format_errors and not self.rejections


_LAUNCH_BOUNDS_RE = re.compile(r"__launch_bounds__\s*\([^)]*\)")
_GLOBAL_RE = re.compile(r"__global__\s+([^(;{]*?)\b(\w+)\s*(?:<[^<>()]*>)?\s*\(")


def cuda_kernel_names(source: str) -> list[str]:
  """Names of `__global__` functions declared anywhere in the candidate source (inside strings)."""
  return sorted({m.group(2) for m in _GLOBAL_RE.finditer(_LAUNCH_BOUNDS_RE.sub(" ", source))})


def dotted_name(node: ast.AST) -> str | None:
  """"a.b.c" for an attribute chain on a name, else None (also used by the teacher's parser)."""
  parts = []
  while isinstance(node, ast.Attribute):
    parts.append(node.attr)
    node = node.value
  if isinstance(node, ast.Name):
    parts.append(node.id)
    return ".".join(reversed(parts))
  return None


def _is_triton_jit(dec: ast.AST) -> bool:
  target = dec.func if isinstance(dec, ast.Call) else dec
  name = dotted_name(target) or ""
  return name.split(".")[-1] in ("jit",) and ("triton" in name or name == "jit")


_C_COMMENT_RE = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def _strip_c_comments(text: str) -> str:
  """Comments mentioning e.g. cuBLAS are not calls to it."""
  return _C_COMMENT_RE.sub(" ", text)


def _string_constants(tree: ast.AST) -> str:
  return "\n".join(n.value for n in ast.walk(tree)
                   if isinstance(n, ast.Constant) and isinstance(n.value, str))


def check_candidate(source: str, backend: str) -> StaticReport:
  """Checks a candidate source for the contract (format) and for forbidden capabilities."""
  report = StaticReport()
  try:
    tree = ast.parse(source)
  except SyntaxError as e:
    report.format_errors.append(f"candidate does not parse: line {e.lineno}: {e.msg}")
    return report

  classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
  if "ModelNew" not in classes:
    report.format_errors.append("candidate defines no top-level `class ModelNew`")
  else:
    methods = {n.name for n in classes["ModelNew"].body
               if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if "forward" not in methods:
      report.format_errors.append("ModelNew defines no forward method")

  _check_imports_and_names(tree, report)
  strings = _strip_c_comments(_string_constants(tree))
  _check_triton(tree, report)
  report.cuda_kernel_names = cuda_kernel_names(strings)
  if backend == "cuda":
    for pattern, why in CUDA_FORBIDDEN_PATTERNS:
      m = pattern.search(strings)
      if m:
        report.rejections.append(f"CUDA source: `{m.group(0).strip()}`: {why}")
    if not report.cuda_kernel_names:
      report.rejections.append("backend cuda: the candidate defines no __global__ kernel")
    if "load_inline" not in source and "load(" not in source:
      report.rejections.append("backend cuda: the candidate never builds its CUDA source "
                               "(torch.utils.cpp_extension.load_inline)")
  elif backend == "triton":
    if not report.triton_kernel_names:
      report.rejections.append("backend triton: the candidate defines no @triton.jit kernel")
  else:
    report.format_errors.append(f"unknown backend {backend!r}")
  # Deduplicate, keep order.
  report.rejections = list(dict.fromkeys(report.rejections))
  return report


def check_module(source: str) -> list[str]:
  """The capability checks of `check_candidate` (imports, builtins, introspection, private APIs,
  monkey-patching, host round trips) for a module a policy wrote as a *reference* (the
  Proposer's): it may compute with torch, but it reaches nothing a candidate may not. Returns
  the reasons it breaks them (empty: none). Raises SyntaxError when it does not parse."""
  report = StaticReport()
  _check_imports_and_names(ast.parse(source), report)
  return list(dict.fromkeys(report.rejections))


def _check_imports_and_names(tree: ast.AST, report: StaticReport) -> None:
  rej = report.rejections
  for node in ast.walk(tree):
    if isinstance(node, (ast.Import, ast.ImportFrom)):
      names = ([a.name for a in node.names] if isinstance(node, ast.Import)
               else [node.module or ""])
      if isinstance(node, ast.ImportFrom) and node.level:
        rej.append("relative imports are not allowed")
        continue
      for name in names:
        root = name.split(".")[0]
        if root not in ALLOWED_IMPORT_ROOTS:
          rej.append(f"imports `{name}`: only torch, triton and small standard modules are allowed")
        elif (name.startswith(FORBIDDEN_SUBMODULE_PREFIXES) or
              (name.startswith("torch.utils") and not name.startswith(ALLOWED_TORCH_UTILS)
               and name != "torch.utils")):
          rej.append(f"imports `{name}`: harness internals and private APIs are off limits")
      if isinstance(node, ast.ImportFrom):
        for a in node.names:
          if a.name.startswith("_") or a.name in FORBIDDEN_ATTRS or a.name in FORBIDDEN_BUILTINS:
            rej.append(f"imports `{a.name}` from `{node.module}`: not allowed")
    elif isinstance(node, ast.Name):
      if node.id in FORBIDDEN_BUILTINS:
        rej.append(f"uses `{node.id}`: dynamic code and introspection are not allowed")
      elif node.id in ("attrgetter", "methodcaller"):
        rej.append(f"uses `{node.id}`: dynamic lookups are not allowed")
    elif isinstance(node, ast.Attribute):
      attr = node.attr
      if attr.startswith("__") and attr.endswith("__"):
        if attr not in ALLOWED_DUNDER_ATTRS:
          rej.append(f"accesses `{attr}`: introspection is not allowed")
      elif attr.startswith("_"):
        # `self._x` is the candidate's own state; private members of anything else (torch._C,
        # tensor._version, module._forward_hooks, ...) are harness internals.
        base = dotted_name(node.value)
        if base != "self":
          rej.append(f"accesses private `{base or '...'}.{attr}`: harness internals are off limits")
      if attr in FORBIDDEN_ATTRS:
        rej.append(f"uses `.{attr}`: {FORBIDDEN_ATTRS[attr]}")
      if attr in FORBIDDEN_MODULE_ATTRS:
        rej.append(f"reaches `{dotted_name(node) or attr}`: a module or capability that candidates "
                   "may not use (the same as importing it)")
    elif isinstance(node, ast.Call):
      fn = node.func
      fname = fn.id if isinstance(fn, ast.Name) else None
      if fname in ("getattr", "hasattr"):
        if len(node.args) < 2 or not (isinstance(node.args[1], ast.Constant) and
                                      isinstance(node.args[1].value, str)):
          rej.append(f"`{fname}` with a computed attribute name: dynamic lookups are not allowed")
        elif node.args[1].value.startswith("_") or node.args[1].value in FORBIDDEN_ATTRS:
          rej.append(f"`{fname}(..., {node.args[1].value!r})`: not allowed")
      if fname == "type" and len(node.args) == 3:
        rej.append("builds classes dynamically with type(name, bases, dict)")
    elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
      targets = (node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target])
      for t in targets:
        for sub in ast.walk(t):
          if isinstance(sub, (ast.Attribute, ast.Subscript)):
            root = dotted_name(sub.value if isinstance(sub, ast.Subscript) else sub) or ""
            head = root.split(".")[0]
            if head in _MODULE_ROOTS_FOR_ASSIGN:
              rej.append(f"assigns into `{root}`: monkey-patching torch/triton/harness "
                         "objects is not allowed")


_TRITON_BODY_BUILTINS = frozenset({"range", "min", "max", "len", "int", "float", "bool", "abs",
                                   "isinstance", "tuple", "list", "True", "False", "None",
                                   "enumerate", "zip"})


def _is_constant_expr(node: ast.AST, constants: set[str], triton_aliases: set[str]) -> bool:
  """A module-level value a kernel may read: literals, arithmetic on them, tl.constexpr(...)."""
  for sub in ast.walk(node):
    if isinstance(sub, (ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop,
                        ast.Load, ast.Tuple, ast.keyword)):
      continue
    if isinstance(sub, ast.Name) and (sub.id in constants or sub.id in triton_aliases):
      continue
    if isinstance(sub, ast.Attribute) and (dotted_name(sub) or "").split(".")[0] in triton_aliases:
      continue
    if isinstance(sub, ast.Call) and (dotted_name(sub.func) or "").split(".")[0] in triton_aliases:
      continue
    return False
  return True


def _check_triton(tree: ast.Module, report: StaticReport) -> None:
  """Finds @triton.jit kernels and checks that their bodies use only Triton: under the CPU
  interpreter a kernel body runs as plain Python, so anything else it could name (torch, a
  lambda, a helper, a mutable global) would run unobserved as part of 'the kernel'."""
  triton_aliases: set[str] = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for a in node.names:
        if a.name.split(".")[0] == "triton":
          triton_aliases.add(a.asname or a.name.split(".")[0])
    elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "triton":
      for a in node.names:
        triton_aliases.add(a.asname or a.name)
  jit_funcs = {}
  for node in ast.walk(tree):
    if isinstance(node, ast.FunctionDef) and any(_is_triton_jit(d) for d in node.decorator_list):
      jit_funcs[node.name] = node
  report.triton_kernel_names = sorted(jit_funcs)
  module_funcs = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
  constants: set[str] = set()
  for node in tree.body:  # in order, so constants may build on earlier constants
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
      targets = node.targets if isinstance(node, ast.Assign) else [node.target]
      if _is_constant_expr(node.value, constants, triton_aliases):
        constants.update(t.id for t in targets if isinstance(t, ast.Name))
  allowed_globals = set(jit_funcs) | triton_aliases | constants | _TRITON_BODY_BUILTINS
  for name, fn in jit_funcs.items():
    local_names = {a.arg for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
    body = [n for stmt in fn.body for n in ast.walk(stmt)]  # not the decorators
    for node in body:
      if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        local_names.add(node.id)
      elif isinstance(node, (ast.comprehension,)):
        for t in ast.walk(node.target):
          if isinstance(t, ast.Name):
            local_names.add(t.id)
    for node in body:
      if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
        if node.id in module_funcs and node.id not in jit_funcs:
          report.rejections.append(
              f"triton kernel `{name}` calls Python function `{node.id}`: kernel bodies may "
              "only call other @triton.jit functions")
        elif node.id not in local_names and node.id not in allowed_globals:
          report.rejections.append(
              f"triton kernel `{name}` uses `{node.id}`: kernel bodies may only use triton, "
              "their arguments, other @triton.jit functions and module-level constants")
      elif isinstance(node, (ast.Lambda, ast.Global, ast.Nonlocal)):
        report.rejections.append(f"triton kernel `{name}` contains Python-only constructs")
