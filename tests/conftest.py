"""Shared pytest fixtures."""

from __future__ import annotations

import os

import pytest

from kernelzero_jax.tasks import kernelbench


@pytest.fixture(scope="session")
def kernelbench_dir() -> str:
  """The KernelBench folder (holding level1/ and level2/), from $KERNELBENCH_DIR or ../shared.

  Skips when it is missing locally, but fails under CI (env CI set): CI always has KernelBench,
  so a skip there would hide a broken setup or a broken loader.
  """
  try:
    return kernelbench.default_kernelbench_dir()
  except kernelbench.TaskError as e:
    msg = f"KernelBench is not available: {e}"
    if os.environ.get("CI"):
      pytest.fail(msg, pytrace=False)
    pytest.skip(msg)
