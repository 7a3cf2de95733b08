"""A judge and its worker raise their CPU priority while they hold the GPU (judge.cpu_priority,
SandboxConfig.hold_nice), and return to their own after; where the machine does not let them,
nothing changes. The judge's holds themselves need a GPU (benchmarks/sandbox_throughput.py,
path token `noboost`); this checks the priorities on real processes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kernelzero_jax.sandbox import SandboxConfig
from kernelzero_jax.sandbox import judge as judge_lib

ROOT = os.geteuid() == 0


def _nice(pid: int) -> int:
  return os.getpriority(os.PRIO_PROCESS, pid)


@pytest.mark.skipif(not ROOT, reason="raising a priority takes root or CAP_SYS_NICE")
def test_the_holders_run_at_the_hold_niceness_inside_and_at_their_own_after():
  sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
  gone = subprocess.Popen([sys.executable, "-c", "pass"])
  gone.wait()
  try:
    own, theirs = _nice(0), _nice(sleeper.pid)
    with judge_lib.cpu_priority([0, gone.pid, sleeper.pid], -7) as allowed:
      assert allowed
      assert _nice(0) == -7 and _nice(sleeper.pid) == -7
    assert _nice(0) == own and _nice(sleeper.pid) == theirs
    with pytest.raises(RuntimeError):  # back at their own when the hold ends in an error too
      with judge_lib.cpu_priority([0, sleeper.pid], -3):
        raise RuntimeError("the check failed")
    assert _nice(0) == own and _nice(sleeper.pid) == theirs
  finally:
    sleeper.kill()
    sleeper.wait()


def test_without_the_right_to_raise_a_priority_nothing_changes():
  # As root, in a child that gives up root first; otherwise in this process itself.
  code = (
      "import os, sys\n"
      "from kernelzero_jax.sandbox import judge\n"
      + ("os.setgid(65534); os.setuid(65534)\n" if ROOT else "")
      + "own = os.getpriority(os.PRIO_PROCESS, 0)\n"
      "with judge.cpu_priority([0], -7) as allowed:\n"
      "  inside = os.getpriority(os.PRIO_PROCESS, 0)\n"
      "print(allowed, inside == own, os.getpriority(os.PRIO_PROCESS, 0) == own)\n")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  assert out.stdout.split() == ["False", "True", "True"]


def test_the_hold_niceness_is_a_niceness_or_none():
  assert SandboxConfig(device="cpu").hold_nice == -10
  assert SandboxConfig(device="cpu", hold_nice=None).hold_nice is None
  for nice in (-21, 20):
    with pytest.raises(ValueError, match="hold_nice must be None or in"):
      SandboxConfig(device="cpu", hold_nice=nice)
