"""Triton's driver utilities compiled once per machine and planted in candidates' caches
(sandbox/triton_seed.py).

Triton links its driver utilities against the CUDA driver library, which this machine lacks: the
tests build a stand-in libcuda.so.1 that exports every cu* function the utilities call
(benchmarks/triton_seed.py: found with `nm` in an object compiled from Triton's driver.c), so the utilities compile and load
here as on a GPU machine. Then a process whose compiler cannot run (CC=/bin/false) loads them
from a planted cache, and the same process without the plant fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tempfile

import pytest

from benchmarks.triton_seed import build_stub_libcuda
from kernelzero_jax.sandbox import judge as judge_lib
from kernelzero_jax.sandbox import triton_seed
from kernelzero_jax.sandbox import worker as worker_lib


@pytest.fixture(scope="module")
def stub_libcuda(tmp_path_factory) -> str:
  return build_stub_libcuda(str(tmp_path_factory.mktemp("stub_libcuda")))


@pytest.fixture
def with_libcuda(monkeypatch, stub_libcuda) -> str:
  monkeypatch.setenv("TRITON_LIBCUDA_PATH", stub_libcuda)
  monkeypatch.setenv("LD_LIBRARY_PATH", stub_libcuda)
  return stub_libcuda


def _load_utils(cache: str) -> subprocess.CompletedProcess:
  """A fresh process that loads Triton's driver utilities from `cache` and cannot compile."""
  env = dict(os.environ, TRITON_CACHE_DIR=cache, CC="/bin/false")
  env.pop("TRITON_INTERPRET", None)
  return subprocess.run([sys.executable, "-c", triton_seed._COMPILE], env=env,  # pylint: disable=protected-access
                        capture_output=True, text=True, timeout=240, check=False)


def test_a_planted_seed_is_what_a_process_that_cannot_compile_loads(with_libcuda, tmp_path):
  del with_libcuda
  manifest = triton_seed.ensure_seed(str(tmp_path))
  assert not manifest.get("error"), manifest
  seed = triton_seed.ready_seed(str(tmp_path))
  assert seed == triton_seed.seed_dir(str(tmp_path))
  assert [os.path.basename(f) for f in manifest["files"]] == [
      "cuda_utils" + sysconfig.get_config_var("EXT_SUFFIX")]
  planted, bare = str(tmp_path / "planted"), str(tmp_path / "bare")
  assert triton_seed.plant(seed, planted) == {"planted": 1, "changed": []}
  out = _load_utils(planted)
  assert out.returncode == 0, out.stderr[-2000:]
  out = _load_utils(bare)  # the same without the seed: it must compile, and cannot
  assert out.returncode != 0 and "/bin/false" in out.stderr
  # A second pool finds the seed built: nothing is compiled again.
  so = os.path.join(seed, triton_seed.CACHE, next(iter(manifest["files"])))
  before = os.stat(so).st_mtime_ns
  assert triton_seed.ensure_seed(str(tmp_path))["files"] == manifest["files"]
  assert os.stat(so).st_mtime_ns == before


def test_a_changed_seed_file_or_a_path_out_of_the_cache_is_not_planted(with_libcuda, tmp_path):
  del with_libcuda
  manifest = triton_seed.ensure_seed(str(tmp_path))
  seed = triton_seed.ready_seed(str(tmp_path))
  relative = next(iter(manifest["files"]))
  with open(os.path.join(seed, triton_seed.CACHE, relative), "ab") as f:  # e.g. a compiler's -o
    f.write(b"\0")
  target = str(tmp_path / "cache")
  assert triton_seed.plant(seed, target) == {"planted": 0, "changed": [relative]}
  assert not os.path.exists(os.path.join(target, relative))
  # A manifest naming a file outside the cache plants nothing there either.
  escaping = dict(manifest, files={"../escaped.so": manifest["files"][relative]})
  with open(os.path.join(seed, triton_seed.MANIFEST), "w", encoding="utf-8") as f:
    json.dump(escaping, f)
  assert triton_seed.plant(seed, target)["changed"] == ["../escaped.so"]
  assert not os.path.exists(tmp_path / "escaped.so")


def test_without_the_cuda_driver_library_the_seed_says_why_and_is_not_used(monkeypatch, tmp_path):
  monkeypatch.setenv("TRITON_LIBCUDA_PATH", str(tmp_path / "nowhere"))
  monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
  manifest = triton_seed.ensure_seed(str(tmp_path))
  assert manifest["error"] and manifest["files"] == {}
  assert triton_seed.ready_seed(str(tmp_path)) is None


def test_a_judge_plants_the_seed_in_its_candidates_cache_before_the_worker_starts(
    with_libcuda, tmp_path):
  del with_libcuda
  manifest = triton_seed.ensure_seed(str(tmp_path))
  job = {"backend": "triton", "config": {"device": "cuda", "pch_dir": str(tmp_path)},
         "candidate_source": "", "reference_source": ""}
  judge = judge_lib.Judge(job)
  try:
    judge._plant_triton_seed()  # pylint: disable=protected-access
    assert judge.verdict.evidence["triton_seed"] == {"planted": 1, "changed": []}
    relative = next(iter(manifest["files"]))
    assert os.path.exists(os.path.join(judge.workdir, worker_lib.TRITON_CACHE, relative))
  finally:
    judge_lib.shutil.rmtree(judge.workdir, ignore_errors=True)
  # No seed built on this machine: the judge says so, and the candidate compiles as before.
  empty = tempfile.mkdtemp(prefix="kz_no_seed_")
  judge = judge_lib.Judge(dict(job, config={"device": "cuda", "pch_dir": empty}))
  try:
    judge._plant_triton_seed()  # pylint: disable=protected-access
    assert judge.verdict.evidence["triton_seed"] == {"planted": 0, "changed": [], "missing": True}
  finally:
    judge_lib.shutil.rmtree(judge.workdir, ignore_errors=True)
