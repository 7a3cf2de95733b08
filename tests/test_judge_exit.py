"""How long a judge's process took to start (stage_seconds["launch"]) and to end after it wrote
its verdict (stage_seconds["exit"]).

A GPU judge's exit tears its CUDA context down, driver work that other processes contend for,
while the pool keeps the judge's place. Here a stand-in judge writes its verdict and then takes
EXIT_S to end, under both launchers: the caller measures that end, and a verdict without the
caller's secret is still refused.
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from kernelzero_jax.sandbox import SandboxConfig
from kernelzero_jax.sandbox import launchers

REPO = pathlib.Path(__file__).parent.parent
EXIT_S = 3.0  # how long the stand-in judge takes to end after it wrote its verdict

# A stand-in for judge.main(["judge", JOB, RESULT]) (and, in the warm server's judge processes,
# judge.judge_job_file(JOB, RESULT)): the verdict (with the nonce from stdin, or a
# wrong one), then a slow end.
FAKE_JUDGE = textwrap.dedent(f"""
    import json, os, sys, time
    def fake_main(argv):
      entered = time.monotonic()
      job = json.load(open(argv[1]))
      nonce = os.read(0, 4096).decode().strip()
      if job.get("forge"):
        nonce = "guessed"
      verdict = {{"status": "correct", "backend": "triton", "stage_seconds": {{"build": 0.1}}}}
      with open(argv[2] + ".tmp", "w") as f:
        json.dump({{"nonce": nonce, "verdict": verdict, "entered_at": entered,
                    "written_at": time.monotonic()}}, f)
      os.replace(argv[2] + ".tmp", argv[2])
      time.sleep({EXIT_S})
      return 0
""")


@pytest.fixture(name="plain")
def plain_launcher(monkeypatch, tmp_path):
  return _script_launcher(monkeypatch, tmp_path / "fake_judge.py",
                          FAKE_JUDGE + "sys.exit(fake_main(sys.argv))\n")


def _script_launcher(monkeypatch, script: pathlib.Path, text: str) -> launchers.SubprocessLauncher:
  """A SubprocessLauncher whose judge processes run `text` (a script) instead of judge.main."""
  script.write_text(text)
  monkeypatch.setattr(launchers, "_judge_command",
                      lambda job, result: [sys.executable, str(script), job, result])
  return launchers.SubprocessLauncher()


# The real judge.judge_job_file, its judgement replaced, in a process whose wall clock was set
# 100 s ahead as it started (as an NTP step does): the spans it shares with the caller must not
# read that step.
STEPPED_JUDGE = textwrap.dedent(f"""
    import sys, time
    wall = time.time
    time.time = lambda: wall() + 100.0
    from kernelzero_jax.sandbox import judge, verdict
    judge.run_job = lambda job: verdict.Verdict(status="correct", backend="triton")
    ok = judge.judge_job_file(sys.argv[1], sys.argv[2])
    time.sleep({EXIT_S})
    sys.exit(0 if ok else 1)
""")


@pytest.fixture(name="stepped")
def stepped_clock_launcher(monkeypatch, tmp_path):
  return _script_launcher(monkeypatch, tmp_path / "stepped_judge.py", STEPPED_JUDGE)


@pytest.fixture(name="warm")
def warm_launcher(tmp_path):
  """A ZygoteLauncher whose server forks the stand-in instead of judge.main."""
  path = str(tmp_path / "zygote.sock")
  code = (FAKE_JUDGE + "from kernelzero_jax.sandbox import judge, zygote\n"
          "judge.judge_job_file = lambda job, result, number=1: fake_main(['judge', job, result])"
          f" == 0\nzygote.serve({path!r}, 'cpu')\n")
  server = subprocess.Popen([sys.executable, "-c", code], cwd=REPO,
                            env=dict(os.environ, PYTHONPATH=str(REPO)), start_new_session=True)

  class Served(launchers.ZygoteLauncher):
    def _ensure_server(self):
      return path, server

  try:
    deadline = time.monotonic() + 120
    while not os.path.exists(path):
      assert server.poll() is None and time.monotonic() < deadline, "the server did not start"
      time.sleep(0.05)
    yield Served("cpu")
  finally:
    os.killpg(server.pid, signal.SIGKILL)
    server.wait()


def _judge(launcher, forge: bool = False) -> tuple[dict | None, str, float]:
  job = {"kind": "candidate", "backend": "triton", "forge": forge}
  config = SandboxConfig(device="cpu")
  t0 = time.monotonic()
  verdict, why, timed_out = launchers.run_judge(job, config, launcher)
  assert not timed_out
  return verdict, why, time.monotonic() - t0


@pytest.mark.parametrize("which", ["plain", "warm", "stepped"])
def test_the_judges_end_is_measured(which, request):
  launcher = request.getfixturevalue(which)
  verdict, why, seconds = _judge(launcher)
  assert verdict is not None, why
  assert seconds >= EXIT_S
  assert EXIT_S - 0.5 <= verdict["stage_seconds"]["exit"] <= seconds
  # ...and the launch, up to the judge's entry point, comes before it
  assert 0 <= verdict["stage_seconds"]["launch"] <= seconds - verdict["stage_seconds"]["exit"]


@pytest.mark.parametrize("which", ["plain", "warm"])
def test_a_verdict_without_the_secret_is_refused(which, request):
  launcher = request.getfixturevalue(which)
  verdict, why, _ = _judge(launcher, forge=True)
  assert verdict is None and "secret" in why
