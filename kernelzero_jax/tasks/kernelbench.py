"""KernelBench problem loader: finds, reads and statically checks reference modules.

Pure Python on purpose: the trainer lists and ships tasks, but only sandbox processes execute them,
so this module must not import torch.

A KernelBench directory is the folder that holds `level1/`, `level2/`, ...; each level holds files
named `<id>_<name>.py` (e.g. `level1/19_ReLU.py`) in the reference-module format (DESIGN.md).
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
from typing import Iterable

# Where to send users who have no KernelBench checkout; relative to the repository root.
_HOWTO = "third_party/README.md"
_ENV_VAR = "KERNELBENCH_DIR"
_LEVEL_DIR_RE = re.compile(r"^level(\d+)$")
_PROBLEM_FILE_RE = re.compile(r"^(\d+)_.+\.py$")


class TaskError(ValueError):
  """A task could not be found, read or validated."""


@dataclasses.dataclass(frozen=True)
class Task:
  """One reference module (KernelBench format) and where it came from."""

  name: str  # File stem, e.g. "19_ReLU".
  source: str = dataclasses.field(repr=False)  # Whole files would flood logs and errors.
  path: str | None
  level: int | None
  problem_id: int | None

  @property
  def key(self) -> str:
    """A unique, human-readable id: "level1/19_ReLU", or just the name outside a level."""
    if self.level is None:
      return self.name
    return f"level{self.level}/{self.name}"


def _repo_root() -> str:
  # The parent of the kernelzero_jax package directory.
  return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def default_kernelbench_dir() -> str:
  """$KERNELBENCH_DIR if set, else `<repo>/../shared/kernelbench` if it exists."""
  env = os.environ.get(_ENV_VAR)
  if env:
    path = os.path.abspath(os.path.expanduser(env))
    # An explicit setting that points nowhere is a mistake; do not silently fall back.
    if not os.path.isdir(path):
      raise TaskError(f"{_ENV_VAR}={env!r} is not a directory; point it at the KernelBench folder "
                      f"that contains level1/ and level2/ (see {_HOWTO})")
    return path
  shared = os.path.normpath(os.path.join(_repo_root(), os.pardir, "shared", "kernelbench"))
  if os.path.isdir(shared):
    return shared
  raise TaskError(f"KernelBench not found: set {_ENV_VAR} (or pass --kernelbench_dir) to the "
                  f"KernelBench folder that contains level1/ and level2/, or put it at {shared}; "
                  f"{_HOWTO} says how to get it")


def _resolve_dir(kernelbench_dir: str | None) -> str:
  if kernelbench_dir is None:
    return default_kernelbench_dir()
  path = os.path.abspath(os.path.expanduser(kernelbench_dir))
  if not os.path.isdir(path):
    raise TaskError(f"KernelBench directory {kernelbench_dir!r} does not exist (see {_HOWTO})")
  return path


def _level_dir(root: str, level: int) -> str:
  if isinstance(level, bool) or not isinstance(level, int) or level < 1:
    raise TaskError(f"unknown level {level!r}: levels are positive integers (1, 2, ...)")
  path = os.path.join(root, f"level{level}")
  if not os.path.isdir(path):
    available = sorted(int(m.group(1)) for m in map(_LEVEL_DIR_RE.match, _listdir(root)) if m)
    msg = f"unknown level {level}: no level{level} directory in {root}"
    msg += f" (levels found: {', '.join(map(str, available)) or 'none'})"
    # A common mistake is pointing at the repository checkout instead of KernelBench/ inside it.
    if os.path.isdir(os.path.join(root, "KernelBench", f"level{level}")):
      msg += f"; did you mean {os.path.join(root, 'KernelBench')}?"
    raise TaskError(msg)
  return path


def _listdir(path: str) -> list[str]:
  try:
    return sorted(os.listdir(path))
  except OSError as e:
    raise TaskError(f"cannot list {path}: {e}") from e


def _index_level(level_dir: str) -> dict[int, str]:
  """Maps problem id -> file path for one level directory."""
  index: dict[int, str] = {}
  for entry in _listdir(level_dir):
    # Skip non-Python files and package/private helpers; anything else must be a problem file.
    if not entry.endswith(".py") or entry.startswith("_"):
      continue
    path = os.path.join(level_dir, entry)
    m = _PROBLEM_FILE_RE.match(entry)
    if not m:
      raise TaskError(f"{path}: file name does not start with a problem id "
                      "(expected <id>_<name>.py)")
    pid = int(m.group(1))
    if pid in index:
      raise TaskError(f"duplicate problem id {pid} in {level_dir}: "
                      f"{os.path.basename(index[pid])} and {entry}")
    index[pid] = path
  return index


def _read(path: str) -> str:
  try:
    with open(path, encoding="utf-8") as f:
      return f.read()
  except (OSError, UnicodeDecodeError) as e:
    raise TaskError(f"cannot read {path}: {e}") from e


def _make_task(path: str, level: int | None, problem_id: int | None) -> Task:
  source = _read(path)
  validate_reference_source(source, filename=path)
  name = os.path.splitext(os.path.basename(path))[0]
  return Task(name=name, source=source, path=path, level=level, problem_id=problem_id)


def list_tasks(kernelbench_dir: str | None = None,
               levels: Iterable[int] | int = (1, 2)) -> list[Task]:
  """All problems of the given levels, sorted by (level, problem_id)."""
  root = _resolve_dir(kernelbench_dir)
  if isinstance(levels, int):
    levels = (levels,)
  tasks = []
  for level in sorted(set(levels)):
    index = _index_level(_level_dir(root, level))
    tasks.extend(_make_task(index[pid], level, pid) for pid in sorted(index))
  return tasks


def scan_tasks(kernelbench_dir: str | None = None, levels: Iterable[int] | int = (1, 2)
               ) -> tuple[list[Task], list[str]]:
  """Like `list_tasks`, but a problem file that does not load is reported, not raised:
  (tasks, problems). For long runs (evaluation) where one broken file must not stop the rest."""
  root = _resolve_dir(kernelbench_dir)
  if isinstance(levels, int):
    levels = (levels,)
  tasks, problems = [], []
  for level in sorted(set(levels)):
    index = _index_level(_level_dir(root, level))
    for pid in sorted(index):
      try:
        tasks.append(_make_task(index[pid], level, pid))
      except TaskError as e:
        problems.append(str(e))
  return tasks, problems


def load_task(level: int, problem_id: int, kernelbench_dir: str | None = None) -> Task:
  """One problem, e.g. load_task(1, 19) -> level1/19_ReLU."""
  root = _resolve_dir(kernelbench_dir)
  level_dir = _level_dir(root, level)
  index = _index_level(level_dir)
  if problem_id not in index:
    raise TaskError(f"no problem {problem_id} in {level_dir} "
                    f"({len(index)} problems; expected a file named {problem_id}_<name>.py)")
  return _make_task(index[problem_id], level, problem_id)


def load_reference_file(path: str) -> Task:
  """A single reference module anywhere on disk.

  Level and id are taken from the path only when it looks like `.../level<N>/<id>_<name>.py`.
  """
  path = os.path.abspath(os.path.expanduser(path))
  if not os.path.isfile(path):
    raise TaskError(f"cannot read {path}: no such file")
  level = problem_id = None
  level_match = _LEVEL_DIR_RE.match(os.path.basename(os.path.dirname(path)))
  file_match = _PROBLEM_FILE_RE.match(os.path.basename(path))
  if level_match and file_match:
    level, problem_id = int(level_match.group(1)), int(file_match.group(1))
  return _make_task(path, level, problem_id)


def _binds(node: ast.stmt, name: str) -> bool:
  """Whether a statement binds `name` in its scope (def or plain assignment)."""
  if isinstance(node, ast.FunctionDef):
    return node.name == name
  if isinstance(node, ast.Assign):
    return any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
  if isinstance(node, ast.AnnAssign):
    return isinstance(node.target, ast.Name) and node.target.id == name and node.value is not None
  return False


def validate_reference_source(source: str, filename: str = "<reference>") -> None:
  """Static checks of the KernelBench format; raises TaskError listing every problem found.

  This does not execute anything (that happens only in the sandbox), so it cannot tell whether
  Model really subclasses torch.nn.Module; it catches malformed files early and cheaply.
  """
  try:
    tree = ast.parse(source, filename=filename)
  except SyntaxError as e:
    raise TaskError(f"{filename}: syntax error at line {e.lineno}: {e.msg}") from e

  problems = []
  model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
  if model is None:
    problems.append("no top-level `class Model` (expected class Model(torch.nn.Module))")
  elif not any(_binds(n, "forward") for n in model.body):
    problems.append("class Model does not define forward()")
  missing = [f for f in ("get_inputs", "get_init_inputs")
             if not any(isinstance(n, ast.FunctionDef) and n.name == f for n in tree.body)]
  if missing:
    problems.append(f"missing top-level function(s): {', '.join(missing)}")
  if problems:
    raise TaskError(f"{filename}: {'; '.join(problems)}")
