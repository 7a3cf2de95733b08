"""atomic_file: a record is replaced whole or not at all, and no temporary file is left behind."""

import json
import os

import pytest

from kernelzero_jax import atomic_file


def test_write_json_and_jsonl_replace_the_file(tmp_path):
  path = str(tmp_path / "record.json")
  atomic_file.write_json(path, {"a": 1})
  atomic_file.write_json(path, {"b": [1, 2]}, indent=2, sort_keys=True)
  with open(path, encoding="utf-8") as f:
    assert f.read() == '{\n  "b": [\n    1,\n    2\n  ]\n}'
  lines = str(tmp_path / "rows.jsonl")
  atomic_file.write_jsonl(lines, ({"i": i} for i in range(3)))
  with open(lines, encoding="utf-8") as f:
    assert [json.loads(line) for line in f] == [{"i": 0}, {"i": 1}, {"i": 2}]
  assert sorted(os.listdir(tmp_path)) == ["record.json", "rows.jsonl"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
  path = str(tmp_path / "record.json")
  atomic_file.write_json(path, {"kept": True})
  with pytest.raises(TypeError):  # json.dump fails midway: the object is not serialisable
    atomic_file.write_json(path, {"first": 1, "second": object()})
  with pytest.raises(ValueError):
    atomic_file.write_json(path, {"x": float("nan")}, allow_nan=False)
  with pytest.raises(KeyboardInterrupt):
    with atomic_file.replacing(path) as f:
      f.write("half a rec")
      raise KeyboardInterrupt
  with open(path, encoding="utf-8") as f:
    assert json.load(f) == {"kept": True}
  assert os.listdir(tmp_path) == ["record.json"]


def test_the_temporary_file_is_beside_the_path_and_named_for_the_process(tmp_path):
  path = str(tmp_path / "out.txt")
  with atomic_file.replacing(path) as f:
    assert f.name == f"{path}.{os.getpid()}.tmp"
    f.write("text")
    assert not os.path.exists(path)  # a reader sees nothing until the block ends
  with open(path, encoding="utf-8") as f:
    assert f.read() == "text"
