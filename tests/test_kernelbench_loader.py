"""Tests for kernelzero_jax.tasks.kernelbench (CPU, no GPU, no full-size inputs)."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import subprocess
import sys

import pytest

from kernelzero_jax.tasks import kernelbench
from kernelzero_jax.tasks import list_tasks
from kernelzero_jax.tasks import load_reference_file
from kernelzero_jax.tasks import load_task
from kernelzero_jax.tasks import Task
from kernelzero_jax.tasks import TaskError
from kernelzero_jax.tasks import validate_reference_source

# KernelBench at the pinned commit has problems 1..100 in each of level1 and level2.
_ALL_PROBLEMS = [(level, pid) for level in (1, 2) for pid in range(1, 101)]

_GOOD = """\
import torch

class Model(torch.nn.Module):
  def __init__(self):
    super().__init__()

  def forward(self, x):
    return x + 1

def get_inputs():
  return [torch.rand(4)]

def get_init_inputs():
  return []
"""


def _write(path: pathlib.Path, text: str = _GOOD) -> str:
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(text)
  return str(path)


@pytest.fixture
def fake_kb(tmp_path: pathlib.Path) -> str:
  """A two-level KernelBench-shaped tree with a few valid problems."""
  root = tmp_path / "kb"
  _write(root / "level1" / "1_Add.py")
  _write(root / "level1" / "2_Other.py")
  _write(root / "level1" / "10_Ten.py")
  _write(root / "level2" / "3_Fused.py")
  (root / "level1" / "notes.txt").write_text("not a problem")  # Non-.py files are ignored.
  return str(root)


# --- The real KernelBench problems -------------------------------------------------------------


def test_list_tasks_finds_all_200(kernelbench_dir):
  tasks = list_tasks(kernelbench_dir)
  assert [(t.level, t.problem_id) for t in tasks] == _ALL_PROBLEMS
  assert len({t.key for t in tasks}) == 200
  for t in tasks:
    assert t.key == f"level{t.level}/{t.name}"
    assert os.path.basename(t.path) == f"{t.name}.py"
    assert os.path.basename(os.path.dirname(t.path)) == f"level{t.level}"


def test_list_tasks_one_level(kernelbench_dir):
  tasks = list_tasks(kernelbench_dir, levels=2)
  assert [t.problem_id for t in tasks] == list(range(1, 101))
  assert {t.level for t in tasks} == {2}


def test_default_dir_is_used(kernelbench_dir):
  # The fixture resolved it through default_kernelbench_dir(); the no-argument calls must agree.
  assert load_task(1, 19).path == load_task(1, 19, kernelbench_dir).path


def test_known_task(kernelbench_dir):
  task = load_task(1, 19, kernelbench_dir)
  assert task.name == "19_ReLU"
  assert task.key == "level1/19_ReLU"
  assert (task.level, task.problem_id) == (1, 19)
  assert "torch.relu" in task.source
  assert "source" not in repr(task)  # Whole files stay out of logs.


@pytest.mark.parametrize("level,pid", _ALL_PROBLEMS, ids=[f"l{l}_{p}" for l, p in _ALL_PROBLEMS])
def test_every_problem_loads_and_executes(kernelbench_dir, level, pid):
  # Imported here, not at the top: the rest of this file must not need torch.
  import torch  # pylint: disable=g-import-not-at-top
  from kernelzero_jax.sandbox import problem  # pylint: disable=g-import-not-at-top

  task = load_task(level, pid, kernelbench_dir)
  assert (task.level, task.problem_id) == (level, pid)
  assert task.name.startswith(f"{pid}_")
  # Loading from the path alone recovers the same identity.
  by_path = load_reference_file(task.path)
  assert (by_path.key, by_path.problem_id, by_path.source) == (task.key, pid, task.source)

  module_name = f"_kb_test_level{level}_{pid}"
  try:
    module = problem.load_module(task.source, module_name, filename=task.path)
    assert isinstance(module.Model, type) and issubclass(module.Model, torch.nn.Module)
    assert callable(module.get_inputs)
    assert callable(module.get_init_inputs)
    # get_inputs() is not called: full-size KernelBench inputs are multi-GB.
    assert isinstance(module.get_init_inputs(), (list, tuple))
  finally:
    sys.modules.pop(module_name, None)


def test_loader_does_not_import_torch():
  # The trainer process lists tasks and must stay torch-free; check in a fresh interpreter.
  code = "import sys, kernelzero_jax.tasks; assert 'torch' not in sys.modules, 'torch imported'"
  repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  subprocess.run([sys.executable, "-c", code], check=True, cwd=repo)


# --- Directory layout errors -------------------------------------------------------------------


def test_fake_tree(fake_kb):
  tasks = list_tasks(fake_kb)
  assert [t.key for t in tasks] == ["level1/1_Add", "level1/2_Other", "level1/10_Ten",
                                    "level2/3_Fused"]
  assert load_task(1, 10, fake_kb).name == "10_Ten"


def test_missing_problem_id(fake_kb):
  with pytest.raises(TaskError, match="no problem 7 in .*level1"):
    load_task(1, 7, fake_kb)


def test_unknown_level(fake_kb):
  with pytest.raises(TaskError) as e:
    load_task(3, 1, fake_kb)
  assert "unknown level 3: no level3 directory in" in str(e.value)
  assert "levels found: 1, 2" in str(e.value)
  with pytest.raises(TaskError, match="unknown level 3"):
    list_tasks(fake_kb, levels=(1, 3))
  with pytest.raises(TaskError, match="unknown level 0"):
    load_task(0, 1, fake_kb)


def test_repo_checkout_instead_of_kernelbench_folder(tmp_path):
  _write(tmp_path / "KernelBench" / "level1" / "1_Add.py")
  with pytest.raises(TaskError, match="did you mean .*KernelBench"):
    list_tasks(str(tmp_path), levels=(1,))


def test_missing_kernelbench_dir(tmp_path):
  with pytest.raises(TaskError, match="does not exist"):
    list_tasks(str(tmp_path / "nowhere"))


def test_duplicate_ids(fake_kb):
  _write(pathlib.Path(fake_kb, "level1", "1_AddAgain.py"))
  with pytest.raises(TaskError) as e:
    list_tasks(fake_kb)
  assert "duplicate problem id 1 in" in str(e.value)
  assert "1_Add.py and 1_AddAgain.py" in str(e.value)


def test_file_without_id_in_level_dir(tmp_path):
  path = _write(tmp_path / "level1" / "helper.py")
  with pytest.raises(TaskError) as e:
    list_tasks(str(tmp_path), levels=(1,))
  assert f"{path}: file name does not start with a problem id" in str(e.value)


def test_invalid_problem_in_tree_names_file(fake_kb):
  path = os.path.join(fake_kb, "level2", "4_Broken.py")
  with open(path, "w") as f:
    f.write(_GOOD.replace("class Model", "class Other"))
  with pytest.raises(TaskError, match="^" + re.escape(f"{path}: no top-level `class Model`")):
    list_tasks(fake_kb)


# --- Single files and validation ---------------------------------------------------------------


def test_reference_file_outside_levels(tmp_path):
  path = _write(tmp_path / "my_module.py")
  task = load_reference_file(path)
  assert task == Task(name="my_module", source=_GOOD, path=path, level=None, problem_id=None)
  assert task.key == "my_module"
  with pytest.raises(dataclasses.FrozenInstanceError):
    task.name = "x"  # type: ignore[misc]


def test_reference_file_in_level_dir(tmp_path):
  task = load_reference_file(_write(tmp_path / "level7" / "5_Foo.py"))
  assert (task.level, task.problem_id, task.key) == (7, 5, "level7/5_Foo")
  # Both parts of the pattern are needed to get an identity.
  task = load_reference_file(_write(tmp_path / "level7" / "Foo.py"))
  assert (task.level, task.problem_id, task.key) == (None, None, "Foo")
  task = load_reference_file(_write(tmp_path / "other" / "5_Foo.py"))
  assert (task.level, task.problem_id) == (None, None)


def test_unreadable_file(tmp_path):
  missing = str(tmp_path / "nope.py")
  with pytest.raises(TaskError, match=re.escape(f"cannot read {missing}: no such file")):
    load_reference_file(missing)
  binary = tmp_path / "binary.py"
  binary.write_bytes(b"\xff\xfe\x00bad")
  with pytest.raises(TaskError, match=re.escape(f"cannot read {binary}")):
    load_reference_file(str(binary))


def test_syntax_error(tmp_path):
  path = _write(tmp_path / "bad.py", _GOOD + "\ndef broken(:\n  pass\n")
  with pytest.raises(TaskError) as e:
    load_reference_file(path)
  assert f"{path}: syntax error at line 16" in str(e.value)
  with pytest.raises(TaskError, match="^<reference>: syntax error at line 1"):
    validate_reference_source("def (")


def test_missing_model(tmp_path):
  path = _write(tmp_path / "no_model.py", _GOOD.replace("class Model(", "class NotModel("))
  with pytest.raises(TaskError) as e:
    load_reference_file(path)
  assert f"{path}: no top-level `class Model`" in str(e.value)


def test_model_not_at_top_level():
  with pytest.raises(TaskError, match="no top-level `class Model`"):
    validate_reference_source("import torch\nif True:\n  class Model: pass\n"
                              "def get_inputs(): return []\ndef get_init_inputs(): return []\n")


def test_missing_get_inputs(tmp_path):
  path = _write(tmp_path / "no_inputs.py", _GOOD.replace("def get_inputs(", "def make_inputs("))
  with pytest.raises(TaskError) as e:
    load_reference_file(path)
  assert f"{path}: missing top-level function(s): get_inputs" in str(e.value)
  assert "get_init_inputs" not in str(e.value)


def test_missing_get_init_inputs():
  with pytest.raises(TaskError, match=r"missing top-level function\(s\): get_init_inputs$"):
    validate_reference_source(_GOOD.replace("def get_init_inputs(", "def init_inputs("))


def test_model_without_forward(tmp_path):
  path = _write(tmp_path / "no_forward.py", _GOOD.replace("def forward(", "def fwd("))
  with pytest.raises(TaskError) as e:
    load_reference_file(path)
  assert f"{path}: class Model does not define forward()" in str(e.value)


def test_forward_by_assignment_is_accepted():
  validate_reference_source(_GOOD.replace("  def forward(self, x):\n    return x + 1\n",
                                          "  forward = torch.nn.Identity.forward\n"))


def test_all_problems_reported_at_once():
  with pytest.raises(TaskError) as e:
    validate_reference_source("import torch\n", filename="empty.py")
  assert str(e.value) == ("empty.py: no top-level `class Model` (expected class "
                          "Model(torch.nn.Module)); missing top-level function(s): get_inputs, "
                          "get_init_inputs")


# --- default_kernelbench_dir -------------------------------------------------------------------


def test_default_dir_from_env(monkeypatch, tmp_path):
  monkeypatch.setenv("KERNELBENCH_DIR", str(tmp_path))
  assert kernelbench.default_kernelbench_dir() == str(tmp_path)


def test_default_dir_env_points_nowhere(monkeypatch, tmp_path):
  monkeypatch.setenv("KERNELBENCH_DIR", str(tmp_path / "missing"))
  with pytest.raises(TaskError, match="KERNELBENCH_DIR=.* is not a directory"):
    kernelbench.default_kernelbench_dir()


def test_default_dir_next_to_repo(monkeypatch, tmp_path):
  monkeypatch.delenv("KERNELBENCH_DIR", raising=False)
  repo = tmp_path / "main"
  repo.mkdir()
  monkeypatch.setattr(kernelbench, "_repo_root", lambda: str(repo))
  with pytest.raises(TaskError) as e:
    kernelbench.default_kernelbench_dir()
  assert "KernelBench not found" in str(e.value)
  assert "third_party/README.md" in str(e.value)
  (tmp_path / "shared" / "kernelbench").mkdir(parents=True)
  assert kernelbench.default_kernelbench_dir() == str(tmp_path / "shared" / "kernelbench")
