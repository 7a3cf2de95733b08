"""The warm servers' imports out of the garbage collector's sight (zygote.freeze_imports).

Judges collect garbage between jobs and kept workers before their memory is checked; with
torch and triton imported a full collection looked at 180,000 objects each time. Here, in fresh
interpreters: what preload freezes, the switch that turns it off, a cycle made afterwards still
collected, and an exit without extension modules' leak reports.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).parent.parent
PRELOAD = """
import gc
from kernelzero_jax.sandbox import zygote
zygote.preload("cpu")
frozen = gc.get_freeze_count()
class Cycle:
  pass
a, b = Cycle(), Cycle()
a.other, b.other = b, a
del a, b
print(frozen, gc.collect())
"""


def _preload(freeze: str | None) -> subprocess.CompletedProcess:
  env = dict(os.environ, PYTHONPATH=str(REPO))
  env.pop("KZ_GC_FREEZE", None)
  if freeze is not None:
    env["KZ_GC_FREEZE"] = freeze
  return subprocess.run([sys.executable, "-c", PRELOAD], cwd=REPO, capture_output=True, text=True,
                        env=env, timeout=300, check=True)


@pytest.mark.parametrize("freeze", [None, "1"])
def test_the_imports_are_frozen_and_later_garbage_still_collected(freeze):
  run = _preload(freeze)
  frozen, collected = map(int, run.stdout.split())
  assert frozen > 50_000  # torch, triton and the sandbox (about 300,000 objects here)
  assert collected >= 2  # the cycle made after the freeze
  assert "leaked" not in run.stderr  # unfrozen at exit: nanobind finds nothing to report


def test_kz_gc_freeze_0_leaves_the_imports_to_the_collector():
  frozen, _ = map(int, _preload("0").stdout.split())
  assert frozen == 0
