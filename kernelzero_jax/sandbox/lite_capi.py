"""A lite build's main.cpp without pybind11: the candidate's functions bound through CPython's API.

load_inline's main.cpp holds the candidate's cpp_sources and a pybind11 module that registers
each of its `functions` through torch::wrap_pybind_function. Against the precompiled binding
header (kz_torch_lite_bind.h) that file takes 2.5 CPU seconds to compile on this project's CPU
machine, most of it pybind11's templates instantiated and compiled at -O0; the same
declarations against the lite header with a CPython function each take 0.5 (BENCHMARKS.md).
`capi_main_cpp` writes that file: the cpp_sources against `lite/kz_torch_lite_capi.h`, then for
each function a METH_FASTCALL function that converts its arguments with pybind11's own casters,
calls it, converts its result with torch's, and translates its exceptions as
torch::wrap_pybind_function does (all in kz_torch_lite_runtime.cpp, compiled once with torch's
headers), then the module's init function under the name load_inline gives
(TORCH_EXTENSION_NAME).

Only what it can bind exactly as pybind11 would: each function declared in the cpp_sources with
one signature (declaration and definition may both be there), of the parameter and return types
in _KINDS (a tensor, an integer, a float, a bool, a list of integers or of tensors; void
returns), with torch's error handling (load_inline's default), and cpp_sources that name no
pybind11. Anything else gets None, and the build binds through pybind11 as before
(fast_build.fast_load_inline).
"""

from __future__ import annotations

import re

from kernelzero_jax.sandbox import lite_build

CAPI_HEADER = "kz_torch_lite_capi.h"

# A parameter or return type, const and references dropped, spaces normalized -> (the kind
# kz_lite_arg and kz_lite_result know, the C++ type of the converted value, pybind11's name).
_TENSOR = ("T", "at::Tensor", "torch.Tensor")
_INT64 = ("l", "int64_t", "int")
_KINDS = {
    "torch::Tensor": _TENSOR, "at::Tensor": _TENSOR, "Tensor": _TENSOR,
    "int64_t": _INT64, "std::int64_t": _INT64, "long": _INT64, "long int": _INT64,
    "long long": _INT64, "long long int": _INT64,
    "int": ("i", "int", "int"), "int32_t": ("i", "int", "int"),
    "double": ("d", "double", "float"), "float": ("f", "float", "float"),
    "bool": ("b", "bool", "bool"),
    "std::vector<int64_t>": ("L", "std::vector<int64_t>", "List[int]"),
    "std::vector<long>": ("L", "std::vector<int64_t>", "List[int]"),
    "std::vector<torch::Tensor>": ("V", "std::vector<at::Tensor>", "List[torch.Tensor]"),
    "std::vector<at::Tensor>": ("V", "std::vector<at::Tensor>", "List[torch.Tensor]"),
}
_VOID = ("v", "void", "None")
_NOT_A_RETURN_TYPE = {"return", "else", "new", "delete", "throw", "case", "goto", "co_return",
                      "co_yield", "sizeof", "typedef", "using", "operator"}
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_PYBIND = re.compile(r"\bpy::|\bpybind11\b|PYBIND11_", re.IGNORECASE)
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*$")


def _normalized(type_text: str) -> tuple[str, bool] | None:
  """(the type with const and &/&& dropped and spaces normalized, whether it was a
  reference), or None for a pointer, an rvalue reference or a volatile."""
  text = " ".join(type_text.replace("<", " < ").replace(">", " > ").split())
  if "*" in text or "&&" in text or "volatile" in text.split():
    return None
  reference = "&" in text
  words = [w for w in text.replace("&", " ").split() if w != "const"]
  return "".join(w if w in "<>" else (" " + w) for w in words).strip().replace(
      " <", "<").replace("< ", "<").replace(" >", ">"), reference


def _split_parameters(text: str) -> list[str]:
  """A parameter list split at its top-level commas (inside template brackets they stay)."""
  out, depth, current = [], 0, []
  for ch in text:
    depth += {"<": 1, ">": -1}.get(ch, 0)
    if ch == "," and depth == 0:
      out.append("".join(current))
      current = []
    else:
      current.append(ch)
  out.append("".join(current))
  return [p.strip() for p in out]


def _parameter(text: str) -> tuple[tuple[str, str, str], bool] | None:
  """A parameter's kind (from _KINDS) and whether it is a reference, its name and default
  value dropped; None for a type not bound here."""
  text = text.split("=", 1)[0].strip()
  if "&&" in text:
    return None
  normalized = _normalized(text)
  if normalized and normalized[0] in _KINDS:
    return _KINDS[normalized[0]], normalized[1]
  head, _, last = text.replace("&", "& ").rstrip().rpartition(" ")
  if head and _IDENTIFIER.match(last):
    normalized = _normalized(head)
    if normalized and normalized[0] in _KINDS:
      return _KINDS[normalized[0]], normalized[1]
  return None


def signature(cpp: str, name: str) -> tuple[tuple, list[tuple[tuple, bool]]] | None:
  """`name`'s (return kind, [(parameter kind, by reference)]) in the C++ text `cpp` (comments
  removed): one signature over all its declarations and definitions, or None where there is
  none, several, or a type not bound here."""
  pattern = re.compile(
      r"(?:^|(?<=[;{}\n]))[ \t]*(?:(?:static|inline|extern|constexpr)\s+)*"
      r"(?P<ret>(?:const\s+)?[A-Za-z_][\w:]*(?:\s*<[^;{}()]*>)?(?:\s+[A-Za-z_]\w*)*\s*&?)\s*"
      + r"\b" + re.escape(name) + r"\s*\((?P<params>[^()]*)\)\s*(?:noexcept\s*)?(?=[;{])")
  found = set()
  for match in pattern.finditer(cpp):
    ret_text = match.group("ret").strip()
    if ret_text.split()[0] in _NOT_A_RETURN_TYPE:
      continue
    ret = _normalized(ret_text)
    if ret is None or ret[1]:
      return None  # a pointer or a reference returned
    kind = _VOID if ret[0] == "void" else _KINDS.get(ret[0])
    if kind is None:
      return None
    params_text = match.group("params").strip()
    params = [] if params_text in ("", "void") else [
        _parameter(p) for p in _split_parameters(params_text)]
    if any(p is None for p in params):
      return None
    found.add((kind, tuple(params)))
  if len(found) != 1:
    return None
  kind, params = found.pop()
  return kind, list(params)


def _function(index: int, name: str, ret: tuple, params: list[tuple[tuple, bool]]) -> str:
  """One METH_FASTCALL function: arguments converted (or pybind11's TypeError), the call,
  the result converted, exceptions translated. Its own names start with kz_, so that none
  hides a candidate's function."""
  shown = ", ".join(f"arg{i}: {kind[2]}" for i, (kind, _) in enumerate(params))
  lines = [f"static PyObject* kz_capi_{index}(PyObject*, PyObject* const* kz_args, "
           "Py_ssize_t kz_nargs) {",
           f'  static const char kz_name[] = "{name}";',
           f'  static const char kz_sig[] = "({shown}) -> {ret[2]}";']
  lines.append(f"  int kz_took = kz_nargs == {len(params)};")
  for i, (kind, _) in enumerate(params):
    lines += [f"  {kind[1]} kz_a{i};",
              f"  if (kz_took == 1) kz_took = kz_lite_arg('{kind[0]}', kz_args[{i}], &kz_a{i});"]
  # A conversion that raised (-1) raises that error, as pybind11's dispatcher does.
  lines += ["  if (kz_took < 0) return nullptr;",
            "  if (kz_took != 1) return kz_lite_incompatible(kz_name, kz_sig, kz_args, kz_nargs);"]
  call = f"{name}(" + ", ".join(f"kz_a{i}" if reference else f"std::move(kz_a{i})"
                                 for i, (_, reference) in enumerate(params)) + ")"
  if ret is _VOID:
    body = [f"    {call};", "    Py_RETURN_NONE;"]
  elif ret[0] in "TLV":
    body = [f"    {ret[1]} kz_r = {call};", f"    return kz_lite_result('{ret[0]}', &kz_r);"]
  elif ret[0] in "li":
    body = [f"    return PyLong_FromLongLong(static_cast<long long>({call}));"]
  elif ret[0] in "df":
    body = [f"    return PyFloat_FromDouble(static_cast<double>({call}));"]
  else:
    body = [f"    return PyBool_FromLong({call} ? 1 : 0);"]
  lines += ["  try {", *body,
            "  } catch (const std::exception&) {",
            "    kz_lite_set_python_error(std::current_exception());",
            "    return nullptr;",
            "  } catch (...) {",
            "    kz_lite_set_python_error_unknown();",
            "    return nullptr;",
            "  }", "}"]
  return "\n".join(lines)


def capi_main_cpp(cpp_sources: list[str], functions: list[str] | dict[str, str] | str,
                  with_pytorch_error_handling: bool = True) -> str | None:
  """The main.cpp of a lite build with `functions` bound through CPython's API, or None where
  it cannot bind them as load_inline's pybind11 module would (the module docstring says
  when)."""
  if not with_pytorch_error_handling or not functions:
    return None
  names = [functions] if isinstance(functions, str) else list(functions)
  docs = functions if isinstance(functions, dict) else {n: n for n in names}
  if len(set(names)) != len(names) or not all(_IDENTIFIER.match(n) for n in names):
    return None
  joined = "\n".join(cpp_sources)
  if _PYBIND.search(joined):
    return None
  main = lite_build.lite_cpp_sources(cpp_sources, header=CAPI_HEADER)
  if main is None:
    return None
  code = _COMMENTS.sub(" ", joined)
  parts, table = main, []
  for index, name in enumerate(names):
    found = signature(code, name)
    if found is None:
      return None
    parts.append(_function(index, name, *found))
    doc = str(docs[name]).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    table.append(f'  {{"{name}", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>('
                 f'kz_capi_{index})), METH_FASTCALL, "{doc}"}},')
  parts.append("\n".join([
      "static PyMethodDef kz_capi_methods[] = {", *table, "  {nullptr, nullptr, 0, nullptr}};",
      "static struct PyModuleDef kz_capi_module = {PyModuleDef_HEAD_INIT, "
      "KZ_CAPI_STR(TORCH_EXTENSION_NAME), nullptr, -1, kz_capi_methods};",
      "PyMODINIT_FUNC KZ_CAPI_CAT(PyInit_, TORCH_EXTENSION_NAME)(void) {",
      "  return PyModule_Create(&kz_capi_module);", "}"]))
  return "\n".join(parts) + "\n"
