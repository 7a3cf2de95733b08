"""The warm judge server (zygote.py) against the plain launcher, on the CPU (Triton interpreter).

Every candidate of the anti-cheat and fault suites (cheats, honest kernels, crashes, hangs,
broken references) is judged once by each launcher; the verdicts must agree. The rest covers what
only the server has: it starts again after it is killed without losing a judge, it refuses
malformed requests, and a worker it forks cannot read the caller's secret.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import pathlib
import signal
import socket
import statistics
import time
import types

import pytest

import test_sandbox_anticheat as anticheat
import test_sandbox_faults as faults
from kernelzero_jax.sandbox import Job
from kernelzero_jax.sandbox import SandboxConfig
from kernelzero_jax.sandbox import SandboxPool
from kernelzero_jax.sandbox import launchers

CANDIDATES = pathlib.Path(__file__).parent / "candidates"


def _read(path: str) -> str:
  return (CANDIDATES / f"{path}.py").read_text()


def _all_jobs() -> dict[str, Job]:
  jobs = {}
  for name, (ref, *_rest) in anticheat.CHEATS.items():
    jobs[f"cheats/{name}"] = Job(_read(f"references/{ref}"), _read(f"cheats/{name}"), "triton",
                                 name)
  for name, ref in anticheat.HONEST.items():
    jobs[f"honest/{name}"] = Job(_read(f"references/{ref}"), _read(f"honest/{name}"), "triton",
                                 name)
  for name, (cand, ref, backend) in faults.JOBS.items():
    jobs[f"faults/{name}"] = Job(_read(f"references/{ref}"), _read(cand), backend, name)
  return jobs


# The warm server's judge processes serving several jobs each (judge_host.py), as on a GPU.
HOSTS = "zygote, 4 jobs per judge process"


@pytest.fixture(scope="module")
def both():
  """{launcher: {key: verdict}} for every candidate, with the fault suite's short timeouts."""
  jobs = _all_jobs()
  out = {}
  for launcher, config in (("zygote", faults.CONFIG), ("subprocess", faults.CONFIG),
                           (HOSTS, dataclasses.replace(faults.CONFIG, jobs_per_judge_process=4))):
    with SandboxPool(config, max_parallel=2, launcher=launcher.partition(",")[0]) as pool:
      out[launcher] = dict(zip(jobs, pool.evaluate(list(jobs.values()))))
  return out


def _summary(v) -> tuple:
  return (v.status, v.stage, v.correct, v.reference_error, sorted(v.degenerate),
          v.num_correct_trials, sorted((v.evidence or {}).get("triton_launches", {}).items()))


@pytest.mark.parametrize("launcher", ["zygote", HOSTS])
def test_launchers_give_the_same_verdict_for_every_candidate(both, launcher):
  plain, warm = both["subprocess"], both[launcher]
  differ = {k: (_summary(plain[k]), _summary(warm[k]), plain[k].reasons[:1], warm[k].reasons[:1])
            for k in plain if _summary(plain[k]) != _summary(warm[k])}
  # A replay cheat keyed on data pointers may or may not meet a reused address (allocator).
  differ.pop("cheats/cache_by_data_ptr", None)
  assert not differ, differ
  assert sum(v.correct for v in warm.values()) >= len(anticheat.HONEST)  # not all failures


def test_judge_processes_serve_several_jobs_only_where_configured(both):
  """Without jobs_per_judge_process (on the CPU: 1) every job has a judge process of its own;
  with 4, processes served up to 4 jobs each, in order, and judged the cheats and faults above
  to the same verdicts as one-job judges."""
  for launcher in ("zygote", "subprocess"):
    processes = [v.evidence["judge_process"] for v in both[launcher].values()
                 if "judge_process" in v.evidence]
    assert processes and all(p["job"] == 1 for p in processes), launcher
  served = [v.evidence["judge_process"]["job"] for v in both[HOSTS].values()
            if "judge_process" in v.evidence]
  # a process's later workers come from its worker server (not spawned for want of one)
  starts = {(v.evidence["judge_process"]["job"] > 1, v.evidence["worker_start"])
            for v in both[HOSTS].values() if "worker_start" in v.evidence}
  assert starts == {(False, "fork"), (True, "forkserver")}, starts
  # each process's jobs are numbered from 1 (so first jobs count the processes), up to 4
  assert set(served) == {1, 2, 3, 4}, served
  assert served.count(1) < len(served) / 2, served


def test_static_reasons_are_identical(both):
  for key, v in both["subprocess"].items():
    if v.stage == "static":
      assert both["zygote"][key].reasons == v.reasons, key


def _honest_job() -> Job:
  return Job(_read("references/scaled_relu"), _read("honest/scaled_relu"), "triton", "honest")


def test_a_killed_server_is_replaced_and_loses_no_judge():
  config = SandboxConfig(device="cpu", num_correct_trials=1)
  with SandboxPool(config, max_parallel=2) as pool:
    first = pool.evaluate([_honest_job()])
    pid = pool.launcher.server_pid()
    assert first[0].correct and pid is not None
    os.killpg(pid, signal.SIGKILL)  # between batches
    second = pool.evaluate([_honest_job()] * 2, once_per_candidate=False)
    assert [v.status for v in second] == ["correct", "correct"]
    third = pool.evaluate([_honest_job()])  # by a new server (or the first failure's restart)
    assert third[0].correct
    assert pool.launcher.server_pid() not in (None, pid)


def test_a_warm_up_starts_the_server_that_the_first_judgement_then_uses():
  config = SandboxConfig(device="cpu", num_correct_trials=1)
  with SandboxPool(config, max_parallel=1) as pool:
    assert pool.launcher.server_pid() is None
    pool.warm_up(["triton"], wait=True)
    pid = pool.launcher.server_pid()
    assert pid is not None
    assert pool.evaluate([_honest_job()])[0].correct
    assert pool.launcher.server_pid() == pid


def test_a_pool_closed_during_its_warm_up_leaves_no_server():
  config = SandboxConfig(device="cpu", num_correct_trials=1)
  pool = SandboxPool(config, max_parallel=1)
  pool.warm_up()  # in the background
  pool.close()
  assert pool.launcher.server_pid() is None


def test_a_server_that_cannot_start_at_the_warm_up_leaves_plain_judges(monkeypatch):
  real_popen = launchers.subprocess.Popen

  def popen(args, *a, **k):
    if "kernelzero_jax.sandbox.zygote" in args:
      args = [args[0], "-c", "raise SystemExit('no server today')"]
    return real_popen(args, *a, **k)

  monkeypatch.setattr(launchers.subprocess, "Popen", popen)
  with SandboxPool(SandboxConfig(device="cpu", num_correct_trials=1), max_parallel=1) as pool:
    pool.warm_up(wait=True)  # does not raise
    assert "no server today" in pool.launcher.start_failure
    assert pool.evaluate([_honest_job()])[0].correct


def test_a_server_killed_mid_judgement_gets_the_job_judged_again():
  # A hanging candidate keeps its judge busy; the server dies under it. The job is judged again
  # by a plain judge, to the verdict it deserves (a timeout), instead of an error about a lost
  # judge.
  import threading
  import psutil
  config = SandboxConfig(device="cpu", correctness_timeout_s=4.0, build_timeout_s=20.0)
  job = Job(_read("references/scaled_relu"), _read("faults/hang_forward"), "triton", "hang")
  with SandboxPool(config, max_parallel=1) as pool:
    out = []
    thread = threading.Thread(target=lambda: out.extend(pool.evaluate([job])))
    thread.start()
    deadline = time.monotonic() + 60
    server = None
    while time.monotonic() < deadline:  # until server -> judge -> worker exists
      pid = pool.launcher.server_pid()
      if pid is not None and len(psutil.Process(pid).children(recursive=True)) >= 2:
        server = pid
        break
      time.sleep(0.1)
    assert server is not None, "the judge never started its worker"
    os.killpg(server, signal.SIGKILL)
    thread.join(timeout=120)
  assert out and out[0].status == "timeout" and out[0].stage == "correctness", out


def test_the_server_refuses_a_malformed_request():
  launcher = launchers.ZygoteLauncher("cpu")
  try:
    path, _ = launcher._ensure_server()  # pylint: disable=protected-access
    for payload, fds in ((b"not json\n", True), (b'{"job_path": "x"}\n', True),
                         (json.dumps({"job_path": "a", "result_path": "b", "log_path": "c",
                                      "cwd": "d"}).encode() + b"\n", False)):
      conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
      conn.settimeout(10)
      conn.connect(path)
      r, w = os.pipe()
      try:
        socket.send_fds(conn, [payload], [r] if fds else [])
        reply = json.loads(conn.makefile("rb").readline())
      finally:
        os.close(r)
        os.close(w)
        conn.close()
      assert "bad request" in reply.get("error", ""), (payload, reply)
    assert launcher.server_pid() is not None  # still serving
  finally:
    launcher.close()
  assert launcher.server_pid() is None


def test_the_server_reports_a_judges_end_at_once_not_at_its_next_look(tmp_path):
  # The server looks for its caller every PARENT_CHECK_S (POLL_S where a judge has no pidfd);
  # both are set to 5 s here, and a judge that fails at once (its job file is missing) must
  # still be reported long before that: the server wakes for the judge's end itself.
  import subprocess
  import sys
  repo = pathlib.Path(__file__).parent.parent
  path = str(tmp_path / "zygote.sock")
  server = subprocess.Popen(
      [sys.executable, "-c", "from kernelzero_jax.sandbox import zygote; "
       f"zygote.PARENT_CHECK_S = zygote.POLL_S = 5.0; zygote.serve({path!r}, 'cpu')"],
      cwd=repo, env=dict(os.environ, PYTHONPATH=str(repo)), start_new_session=True)
  try:
    deadline = time.monotonic() + 120
    while not os.path.exists(path):
      assert server.poll() is None and time.monotonic() < deadline, "the server did not start"
      time.sleep(0.05)
    seconds = []
    for _ in range(2):  # the second judge starts while the server sleeps after the first
      conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
      conn.settimeout(30)
      conn.connect(path)
      r, w = os.pipe()
      try:
        request = {"job_path": str(tmp_path / "missing.json"), "cwd": str(tmp_path),
                   "result_path": str(tmp_path / "result.json"),
                   "log_path": str(tmp_path / "judge.log")}
        socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], [r])
        reader = conn.makefile("rb")
        assert "pid" in json.loads(reader.readline())
        t0 = time.monotonic()
        ended = json.loads(reader.readline())
        seconds.append(time.monotonic() - t0)
      finally:
        os.close(r)
        os.close(w)
        conn.close()
      assert ended["exit"] != 0, ended
    assert max(seconds) < 2.5, seconds
  finally:
    os.killpg(server.pid, signal.SIGKILL)
    server.wait()


def test_a_forked_worker_cannot_read_the_secret_from_stdin(tmp_path):
  # The judge reads the caller's secret from stdin only after its worker is gone; the worker's
  # stdin is /dev/null from its first instruction. The probe is the worker's own setup, run in
  # a process whose stdin holds a secret as a judge's would.
  import subprocess
  import sys
  probe = tmp_path / "probe.py"
  probe.write_text(
      "import os, sys\n"
      "from kernelzero_jax.sandbox import worker\n"
      f"worker._setup_process({{'workdir': {str(tmp_path / 'w')!r}, 'device': 'cpu', "
      "'memory_limit_gb': 4.0})\n"
      "data = os.read(0, 100)\n"
      f"open({str(tmp_path / 'out.txt')!r}, 'wb').write(data)\n")
  repo = pathlib.Path(__file__).parent.parent
  subprocess.run([sys.executable, str(probe)], input=b"the-secret\n", check=True, cwd=repo,
                 env=dict(os.environ, PYTHONPATH=str(repo)), timeout=60)
  assert (tmp_path / "out.txt").read_bytes() == b""


def test_unknown_launcher_is_refused():
  with pytest.raises(ValueError, match="launcher"):
    SandboxPool(SandboxConfig(device="cpu"), launcher="threads")
  with pytest.raises(ValueError, match="device"):
    launchers.ZygoteLauncher("tpu")


def test_a_server_that_cannot_start_leaves_plain_judges(monkeypatch):
  # E.g. an import that initialises CUDA: the server refuses to serve. Every job is still
  # judged (by plain judges), and the launcher stops trying to start servers.
  launcher = launchers.ZygoteLauncher("cpu")
  real_popen = launchers.subprocess.Popen
  starts = []

  def popen(args, *a, **k):
    if "kernelzero_jax.sandbox.zygote" in args:
      starts.append(args)
      args = [args[0], "-c", "raise SystemExit('no server today')"]
    return real_popen(args, *a, **k)

  monkeypatch.setattr(launchers.subprocess, "Popen", popen)
  config = SandboxConfig(device="cpu", num_correct_trials=1)
  pool = SandboxPool(config, max_parallel=1)
  pool.launcher = launcher
  verdicts = pool.evaluate([_honest_job()] * 2, once_per_candidate=False)
  assert [v.status for v in verdicts] == ["correct", "correct"]
  assert len(starts) == 1 and "no server today" in launcher.start_failure


def test_a_forked_worker_takes_its_own_temporary_directory(tmp_path):
  # The warm server imported modules that already asked tempfile for a directory (cached in
  # tempfile.tempdir); a worker forked from it must still create temporary files in its own
  # directory (on a GPU, triton builds its driver there), as a spawned worker does.
  import subprocess
  import sys
  probe = tmp_path / "probe.py"
  workdir = tmp_path / "w"
  probe.write_text(
      "import os, tempfile\n"
      "tempfile.gettempdir()  # cached before the fork, as in the server\n"
      "pid = os.fork()\n"
      "if pid == 0:\n"
      "  from kernelzero_jax.sandbox import worker\n"
      f"  worker._setup_process({{'workdir': {str(workdir)!r}, 'device': 'cpu', "
      "'memory_limit_gb': 4.0})\n"
      "  with tempfile.NamedTemporaryFile(delete=False) as f:\n"
      f"    open({str(tmp_path / 'where.txt')!r}, 'w').write(f.name)\n"
      "  os._exit(0)\n"
      "os.waitpid(pid, 0)\n")
  repo = pathlib.Path(__file__).parent.parent
  subprocess.run([sys.executable, str(probe)], check=True, cwd=repo, timeout=60,
                 env=dict(os.environ, PYTHONPATH=str(repo)))
  assert (tmp_path / "where.txt").read_text().startswith(str(workdir) + os.sep)


def test_startup_seconds_add_up_to_the_build_stage(both):
  """Every built candidate's verdict says where the time up to the build went: the worker's steps
  in order, which together end before the judge had the build, and the judge's own."""
  worker_steps = ["start", "setup", "imports", "device", "observers", "guard", "reference",
                  "candidate_import"]
  for launcher, verdicts in both.items():
    # (a build that failed has its seconds too, and no start-up steps: it ended in the build)
    built = [v for v in verdicts.values() if "build" in v.stage_seconds and v.stage != "build"]
    assert len(built) >= len(anticheat.HONEST), launcher
    for v in built:
      startup = v.evidence["startup_seconds"]
      assert list(startup["worker"]) == worker_steps, (launcher, startup)
      assert list(startup["judge"]) == ["static", "start_worker", "imports", "device",
                                        "reference"], (launcher, startup)
      steps = list(startup["worker"].values()) + list(startup["judge"].values())
      assert all(s >= 0 for s in steps), (launcher, startup)
      # The reference's construction is told apart from the rest of its start-up step (its
      # upload, the fence), which holds it.
      assert 0 <= v.evidence["reference_construct_s"] <= startup["judge"]["reference"], v
      # The worker's steps are consecutive and end when it answers, before the judge reads it.
      assert sum(startup["worker"].values()) <= v.stage_seconds["build"] + 2e-3, (launcher, v)
      # The judge's process started after the launch and ended after its start-up.
      assert 0 <= v.stage_seconds["launch"] <= v.stage_seconds["total"], (launcher, v)
      assert 0 <= v.stage_seconds["exit"] <= v.stage_seconds["total"], (launcher, v)


def test_steps_after_the_build_are_named_and_cover_the_checks(both):
  """evidence["gpu_seconds"]: what a candidate's checks cost, step by step (on a GPU, also its
  timing); the checks are nearly all candidate runs, reference runs and comparisons."""
  checks = ("candidate_profiled_run", "candidate_run", "reference_run", "compare")
  for launcher, verdicts in both.items():
    correct = [v for v in verdicts.values() if v.correct]
    assert correct, launcher
    covered = []
    for v in correct:
      steps = v.evidence["gpu_seconds"]
      optional = {"reference_checks", "reference_construct"}  # not where the facts were reused
      assert set(steps) - optional == {"candidate_construct", "candidate_init", *checks,
                                       "cleanup"}, steps
      # The reference checks' second reference was built on the CPU before them.
      assert "reference_checks" not in steps or "reference_construct" in steps, steps
      assert all(s >= 0 for s in steps.values()), steps
      # The 5 checks plus the post-check's one cover the correctness stage's 5 checks: in
      # every verdict by half at least, and at the median by 90%. (On CI's loaded 2 cores one
      # verdict's checks once held 30 ms outside their steps, descheduled between them.)
      covered.append(sum(steps[k] for k in checks) / v.stage_seconds["correctness"])
      assert covered[-1] >= 0.5, (launcher, v)
    assert statistics.median(covered) >= 0.9, (launcher, covered)
    caught = [v for v in verdicts.values() if v.status == "incorrect"]
    assert caught and all("compare" in v.evidence["gpu_seconds"] for v in caught), launcher


def test_startup_seconds_drop_what_a_candidate_could_forge():
  """The worker reports its steps after the candidate ran: only finite numbers are kept."""
  # pylint: disable-next=import-outside-toplevel
  from kernelzero_jax.sandbox.judge_worker import startup_seconds
  built = {"entered_at": 10.5, "seconds": float("nan"),
           "startup_seconds": {"setup": 0.25, "imports": "fast", "device": True,
                               "guard": float("inf"), "x" * 100: 1.0}}
  out = startup_seconds(built, 10.0, {"device": 0.125})
  assert out == {"worker": {"start": 0.5, "setup": 0.25, "x" * 32: 1.0},
                 "judge": {"device": 0.125}}
  assert startup_seconds({"startup_seconds": ["not", "a", "dict"], "entered_at": None}, 0.0,
                         {}) == {"worker": {}, "judge": {}}


def test_build_steps_keep_only_well_formed_steps_of_known_names():
  """The worker reports its load_inline calls after the candidate ran (evidence["build_steps"])."""
  # pylint: disable-next=import-outside-toplevel
  from kernelzero_jax.sandbox.judge_worker import build_steps
  steps = [{"step": "fast", "seconds": 9.12345, "ok": False},
           {"step": "as_asked", "seconds": 14.5, "ok": True, "extra": "dropped"},
           {"step": "faster", "seconds": 1.0, "ok": True},  # no such step
           {"step": "lite", "seconds": float("nan"), "ok": True},
           {"step": "lite", "seconds": -1.0, "ok": True},
           {"step": "plain", "seconds": True, "ok": True},
           {"step": "plain", "seconds": 2, "ok": "yes"},  # only True is ok
           "not a dict"]
  assert build_steps(steps) == [{"step": "fast", "seconds": 9.123, "ok": False},
                                {"step": "as_asked", "seconds": 14.5, "ok": True},
                                {"step": "plain", "seconds": 2.0, "ok": False}]
  assert build_steps([{"step": "fast", "seconds": 1.0, "ok": True}] * 20) == [
      {"step": "fast", "seconds": 1.0, "ok": True}] * 8
  assert build_steps(None) == build_steps({"step": "fast"}) == []


def test_the_throughput_benchmark_measures_how_timed_copies_spread():
  from benchmarks.sandbox_throughput import copy_spread  # pylint: disable=import-outside-toplevel
  teacher = lambda problem, ms: dict(kind="teacher", problem=problem, backend="triton",
                                     candidate_ms=ms)
  rows = [teacher("a", 10.0), teacher("a", 10.5), teacher("a", 11.0), teacher("a", None),
          teacher("b", 4.0), teacher("b", 4.0), teacher("c", 2.0),  # c: one copy, no spread
          dict(kind="honest", problem="d", backend="cuda", candidate_ms=1.0)]
  assert copy_spread(rows) == {"problems": 2, "median_pct": 4.762, "max_pct": 9.524}
  assert copy_spread([]) == {"problems": 0, "median_pct": None, "max_pct": None}


def test_the_throughput_benchmark_sums_up_the_time_past_forwards_end():
  from benchmarks.sandbox_throughput import after_forward  # pylint: disable=import-outside-toplevel
  timed = lambda **ms: {"evidence": {"timing_after_forward_ms": ms}}
  rows = [timed(candidate=0.02, reference=5.0), timed(candidate=3.5), timed(candidate=0.5),
          timed(reference=0.1), {"evidence": {}}, {}]
  assert after_forward(rows) == {"timed": 3, "median_ms": 0.5, "max_ms": 3.5, "over_1ms": 1}
  assert after_forward([]) == {"timed": 0, "median_ms": None, "max_ms": None, "over_1ms": 0}


def test_the_throughput_benchmark_takes_medians_of_each_step():
  from benchmarks.sandbox_throughput import _startup_medians, _step_medians  # pylint: disable=import-outside-toplevel
  assert _step_medians([{"candidate_run": 1.0, "audits": 2.0}, None, {"candidate_run": 3.0},
                        {"candidate_run": 2.5}]) == {"candidate_run": 2.5, "audits": 2.0}
  rows = [{"evidence": {"startup_seconds": {"worker": {"start": 1.0, "device": 3.0},
                                            "judge": {"reference": 0.5}}}},
          {"evidence": {"startup_seconds": {"worker": {"start": 2.0, "device": 5.0,
                                                       "candidate_import": 0.25},
                                            "judge": {"reference": 1.5}}}},
          {"evidence": {"startup_seconds": {"worker": {"start": 4.0, "device": 4.0},
                                            "judge": {}}}},
          {"evidence": {}},  # never built (a static rejection)
          {}]
  assert _startup_medians(rows) == {
      "worker": {"start": 2.0, "device": 4.0, "candidate_import": 0.25},
      "judge": {"reference": 1.0}}
  assert _startup_medians([]) == {"worker": {}, "judge": {}}

def test_the_benchmarks_count_the_timings_trials_and_compare_two_judgings_times():
  """gpu_steps.timing_trials_summary (reused references left out) and times_against (name by
  name, as sandbox_throughput compares its paths)."""
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel
  row = lambda name, trials, stopped, ms, speedup, **ev: {
      "name": name, "candidate_ms": ms, "speedup": speedup,
      "evidence": {"timing_trials": trials, "timing_stopped": stopped, **ev}}
  rows = [row("a", {"candidate": 10, "reference": 40}, {"candidate": "precision",
                                                        "reference": "planned"}, 2.0, 1.0),
          row("b", {"candidate": 30, "reference": 10}, {"candidate": "planned"}, 4.0, 0.5,
              reference_reused=["timing"]),
          row("c", {"candidate": 12}, {"candidate": "precision"}, 1.0, 2.0),
          {"name": "d", "candidate_ms": None, "evidence": {}}]
  assert gpu_steps.timing_trials_summary(rows) == {
      "candidate": {"timings": 3, "trials": 52, "median": 12,
                    "stopped": {"planned": 1, "precision": 2}},
      "reference": {"timings": 1, "trials": 40, "median": 40, "stopped": {"planned": 1}}}
  others = [dict(rows[0], candidate_ms=2.1, speedup=0.95), dict(rows[1], candidate_ms=3.0,
                                                                speedup=0.5),
            {"name": "c", "candidate_ms": None}, {"name": "e", "candidate_ms": 1.0}]
  assert gpu_steps.times_against(rows, others) == {
      "candidate_ms": {"n": 2, "median_pct": -10.0, "p90_abs_pct": 5.0, "max_abs_pct": 25.0},
      "speedup": {"n": 2, "median_pct": -2.5, "p90_abs_pct": 0.0, "max_abs_pct": 5.0}}


def test_the_benchmarks_compare_two_judgings_speed_terms_and_the_rewarded_bands_ends():
  """gpu_steps.speed_terms_against: the default reward's S (clip(speedup - 1, 0, 2)) name by
  name over candidates correct in both; a speedup on the other side of 1x or 3x is listed."""
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.rl import rewards  # pylint: disable=import-outside-toplevel
  row = lambda name, speedup, correct=True: {"name": name, "speedup": speedup, "correct": correct}
  rows = [row("slow", 0.4), row("near", 1.25), row("fast", 3.5), row("edge", 0.98),
          row("wrong", 2.0, correct=False), row("alone", 2.0)]
  others = [row("slow", 0.2), row("near", 1.5), row("fast", 2.5), row("edge", 1.02),
            row("wrong", 2.0)]
  assert gpu_steps.speed_terms_against(rows, others) == {
      "n": 4, "differ": 3, "sum_abs": 0.77, "max_abs": 0.5, "band": [1.0, 3.0],
      "crossed": [("fast", 3.5, 2.5), ("edge", 0.98, 1.02)]}
  # a wider clip moves the band's upper end: 3.5 and 2.5 now both lie inside it
  wide = gpu_steps.speed_terms_against(rows, others, rewards.RewardConfig(speed_clip=4.0))
  assert wide["band"] == [1.0, 5.0] and wide["crossed"] == [("edge", 0.98, 1.02)]
  assert wide["sum_abs"] == 1.27
  assert gpu_steps.speed_terms_against([], others) == {
      "n": 0, "differ": 0, "sum_abs": 0.0, "max_abs": 0.0, "band": [1.0, 3.0], "crossed": []}


def test_the_benchmarks_compare_two_judgings_prebuilds_name_by_name():
  """gpu_steps.prebuilds_against: only candidates whose prebuilder built them in both count."""
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel
  row = lambda name, seconds, ok=True: {
      "name": name, "evidence": {"cuda_prebuild": {"ok": ok, "seconds": seconds}}}
  rows = [row("a", 2.0), row("b", 3.0), row("c", 4.0), row("failed", 1.0, ok=False),
          {"name": "triton", "evidence": {}}, row("alone", 9.0)]
  others = [row("a", 1.5), row("b", 2.0), row("c", 3.5), row("failed", 1.0),
            {"name": "triton"}]
  assert gpu_steps.prebuilds_against(rows, others) == {
      "n": 3, "median_s": 3.0, "others_median_s": 2.0, "median_difference_s": -0.5,
      "others_over_these": 0.778}
  assert gpu_steps.prebuilds_against([], others) == {
      "n": 0, "median_s": None, "others_median_s": None, "median_difference_s": None,
      "others_over_these": None}


def test_the_benchmarks_say_which_models_took_seconds_to_build_on_the_cpu():
  """gpu_steps.constructions_by_problem: per problem whose reference or candidate model took
  `least_s` or more to build at the median, both builds' medians, ranges and sum; the
  reference's from evidence["reference_construct_s"], or in older verdicts from the start-up's
  step of a judge whose weights stayed on the CPU, less its host-memory wait; neither
  otherwise."""
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel
  row = lambda problem, candidate, total, **evidence: {
      "problem": problem, "stage_seconds": {"total": total},
      "evidence": {"gpu_seconds": {"candidate_construct": candidate}, **evidence}}
  rows = [row("level2/59", 7.5, 20.0, reference_construct_s=8.5),
          row("level2/59", 6.5, 24.0, weights_apart={"host_wait_s": 3.0},
              startup_seconds={"judge": {"reference": 12.5}}),
          row("level2/12", 0.5, 9.0, reference_construct_s=0.5),  # under least_s
          # an older verdict whose start-up step held the upload: not counted
          row("level2/76", 0.5, 9.0, startup_seconds={"judge": {"reference": 8.0}})]
  assert gpu_steps.constructions_by_problem(rows) == {
      "level2/59": {"n": 2, "reference_s": {"median": 9.0, "range": [8.5, 9.5]},
                    "candidate_s": {"median": 7.0, "range": [6.5, 7.5]}, "sum_s": 32.0,
                    "median_total_s": 22.0}}
  assert gpu_steps.constructions_by_problem(rows, least_s=0.25)["level2/12"]["sum_s"] == 1.0
  assert gpu_steps.constructions_by_problem([]) == {}


def test_the_benchmarks_give_the_rate_of_a_batchs_middle_verdicts_apart_from_its_ends():
  """gpu_steps.completion_rates: the whole batch's rate to its last verdict, when the 10th came,
  and the rate between the verdicts that bound the middle share of the arrival order, and what
  the ends cost against that rate."""
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel
  # 20 verdicts: a slow start (the first two at 10 and 12 s), then one a second, a slow end
  times = [10.0, 12.0] + [13.0 + i for i in range(16)] + [40.0, 60.0]
  rows = [{"seconds": t} for t in reversed(times)] + [{"name": "untimed"}]
  assert gpu_steps.completion_rates(rows) == {
      "n": 20, "last_s": 60.0, "per_minute": 20.0, "tenth_s": 20.0,
      "middle": {"share": 0.8, "from_s": 13.0, "to_s": 28.0, "verdicts": 15,
                 "per_minute": 60.0, "start_lost_s": 11.0, "end_lost_s": 30.0}}
  # (the two verdicts before the middle would take 2 s at its rate, they took 13; the two
  # after it 2 s, they took 32)
  assert gpu_steps.completion_rates(rows, middle=1.0)["middle"] == {
      "share": 1.0, "from_s": 10.0, "to_s": 60.0, "verdicts": 19, "per_minute": 22.8,
      "start_lost_s": 10.0, "end_lost_s": 0.0}
  assert gpu_steps.completion_rates([{"seconds": 3.0}]) == {}
  assert gpu_steps.completion_rates([{"seconds": 3.0}, {"seconds": 3.0}]) == {
      "n": 2, "last_s": 3.0, "per_minute": 40.0, "tenth_s": 3.0}


def test_the_benchmarks_set_a_batchs_first_wave_against_its_later_jobs():
  """gpu_steps.first_wave: the jobs started at the submission against the correct ones started
  later, by their build stage, the judge's and the worker's start-up steps, and their total."""
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel

  def row(queue, status, build, total, device=None, fence=None):
    startup = {"judge": {"device": device} if device is not None else {},
               "worker": {"fence": fence} if fence is not None else {}}
    return {"status": status, "stage_seconds": {"queue": queue, "build": build, "total": total},
            "evidence": {"startup_seconds": startup}}

  rows = [row(0.01, "correct", 20.0, 30.0, device=9.0, fence=6.0),
          row(0.02, "rejected", 10.0, 12.0, device=5.0),
          row(0.5, "correct", 16.0, 26.0, device=7.0, fence=4.0),
          row(12.0, "correct", 3.0, 8.0, device=0.0),
          row(13.0, "correct", 5.0, 10.0, device=0.0, fence=2.0),
          row(14.0, "incorrect", 40.0, 50.0, device=0.0),  # later, not correct: left out
          {"status": "correct", "stage_seconds": {}}]  # no queue time: left out
  assert gpu_steps.first_wave(rows) == {
      "first": {"n": 3, "build": 16.0, "judge_device": 7.0, "worker_fence": 5.0, "total": 26.0},
      "later_correct": {"n": 2, "build": 4.0, "judge_device": 0.0, "worker_fence": 2.0,
                        "total": 9.0}}
  assert gpu_steps.first_wave([]) == {
      "first": {"n": 0, "build": None, "judge_device": None, "worker_fence": None, "total": None},
      "later_correct": {"n": 0, "build": None, "judge_device": None, "worker_fence": None,
                        "total": None}}


def test_the_benchmarks_say_where_the_gpu_idled():
  """gpu_steps.idle_by_window: the seconds in each window that no hold covered, from the first
  hold's start; overlapping holds counted once; the last window ends with the last hold."""
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel

  def row(*holds):
    return {"evidence": {"gpu_holds": [list(h) for h in holds]}}

  rows = [row((100.0, 104.0, "alone"), (112.0, 113.0, "shared")),
          row((103.0, 106.0, "shared"), (119.0, 125.0, "alone")),
          row((124.0, 124.5, "shared")), {"evidence": {}}]
  # 0-10: held 0-6 -> 4 idle; 10-20: held 12-13 and 19-20 -> 8; 20-25: held to 25 -> 0
  assert gpu_steps.idle_by_window(rows) == [4.0, 8.0, 0.0]
  assert gpu_steps.idle_by_window(rows, window_s=25.0) == [12.0]
  assert gpu_steps.idle_by_window([{"evidence": {}}]) == []


def test_the_benchmarks_name_problems_whose_reference_step_was_slow():
  """gpu_steps.slow_reference_steps: problems with a judge's start-up step "reference" of
  `least_s` or more, when their judges started, that step's median and range, their last
  verdict; and the batch's last two verdicts."""
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel

  def row(name, problem, queue, reference, seconds):
    return {"name": name, "problem": problem, "seconds": seconds,
            "stage_seconds": {"queue": queue},
            "evidence": {"startup_seconds": {"judge": {"reference": reference}}}}

  rows = [row("a/0", "level2/59", 114.0, 8.0, 130.0), row("a/1", "level2/59", 116.0, 40.0, 170.0),
          row("a/2", "level2/59", 122.0, 66.0, 196.7),
          row("b/0", "level1/19", 2.0, 0.1, 10.0), row("b/1", "level1/19", 3.0, 19.9, 184.5),
          {"name": "cheat", "status": "rejected", "seconds": 150.0, "evidence": {}}]
  assert gpu_steps.slow_reference_steps(rows) == {
      "problems": {"level2/59": {"n": 3, "started_s": [114.0, 122.0],
                                 "reference_step_s": {"median": 40.0, "range": [8.0, 66.0]},
                                 "last_verdict_s": 196.7}},
      "last_verdicts": [(184.5, "b/1"), (196.7, "a/2")]}
  assert list(gpu_steps.slow_reference_steps(rows, least_s=19.9)["problems"]) == [
      "level1/19", "level2/59"]
  assert gpu_steps.slow_reference_steps([]) == {"problems": {}, "last_verdicts": []}


def test_the_benchmarks_say_which_judges_the_weights_ledger_had_no_room_for():
  """gpu_steps.weights_apart_by_problem: only the ledger's refusals (they name what others
  kept); the share that would have kept each is the others' and twice its own, over the GPU;
  their held seconds split into the reference's upload, the timings, the candidate's upload and
  the rest, which add up to them."""
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel
  gib = 2 ** 30
  row = lambda problem, others, steps: {
      "problem": problem, "evidence": {
          "weights_apart": {"weight_bytes": 4 * gib, "gpu_bytes": 100 * gib,
                            "kept_by_others_bytes": others},
          "gpu_seconds": steps}}
  rows = [row("level2/59", 6 * gib, {"reference_upload": 0.5, "candidate_init": 0.75,
                                     "candidate_timing": 0.25, "reference_timing": 0.125,
                                     "candidate_run": 0.375,
                                     "candidate_construct": 9.0}),  # (not under the hold)
          row("level2/59", 2 * gib, {"candidate_timing": 1.5}),
          row("level2/55", 3 * gib, {"candidate_timing": 1.0}),
          {"problem": "level2/56", "evidence": {"weights_apart": {  # without the ledger
              "weight_bytes": 4 * gib, "gpu_bytes": 100 * gib, "judges_on_gpu": 24}}},
          {"problem": "level1/19", "evidence": {}}]
  assert gpu_steps.weights_apart_by_problem(rows) == {
      "level2/55": {"n": 1, "weight_gib": 4.0, "others_gib": [3.0, 3.0], "share_to_keep": 0.11,
                    "held_s": 1.0, "reference_upload_s": 0.0, "timings_s": 1.0,
                    "candidate_init_s": 0.0, "rest_s": 0.0},
      "level2/59": {"n": 2, "weight_gib": 4.0, "others_gib": [2.0, 6.0], "share_to_keep": 0.14,
                    "held_s": 3.5, "reference_upload_s": 0.5, "timings_s": 1.88,
                    "candidate_init_s": 0.75, "rest_s": 0.38}}
  assert gpu_steps.weights_apart_by_problem([]) == {}


def test_the_benchmarks_sum_the_timings_fence_waits_with_the_gpu_held_apart_from_those_before():
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel
  row = lambda waits, first=False: {"evidence": {"fence_wait_s": waits,
                                                 "reference_first": {"timed": first}}}
  rows = [row({"reference_timing": 1.25, "upload": 3.0}, first=True),
          row({"reference_timing": 0.5, "candidate_timing": 0.004}),
          row({"candidate_timing": 0.75, "timing": 2.0}),
          row({"reference_first": 0.4}), {"evidence": {}}, {}]
  assert gpu_steps.fence_waits_holding_gpu(rows) == {
      "reference_timing": {"n": 2, "sum_s": 1.8, "max_s": 1.25, "holding_gpu": True,
                           "measured_first_s": 1.2},
      "candidate_timing": {"n": 1, "sum_s": 0.8, "max_s": 0.75, "holding_gpu": True},
      "reference_first": {"n": 1, "sum_s": 0.4, "max_s": 0.4, "holding_gpu": False}}
  assert gpu_steps.fence_waits_holding_gpu([]) == {}


def test_the_benchmarks_summarise_what_timing_trials_say_they_cost_beyond_their_measurement():
  """What verdicts say (evidence["timing_loop_ms"]), as sandbox_throughput and gpu_steps report
  it: gpu_steps.timing_calls_beyond's "said"."""
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel
  loop = lambda **sides: {"evidence": {"timing_loop_ms": sides}}
  rows = [loop(candidate={"inputs_ms": 2.0, "beyond_ms": 2.5}),
          loop(candidate={"inputs_ms": 4.0, "beyond_ms": 4.5},
               reference={"inputs_ms": 0.0, "beyond_ms": 0.3}),
          loop(candidate={"beyond_ms": 9.0}), {"evidence": {}}, {}]
  out = gpu_steps.timing_calls_beyond(rows)
  assert {side: o["said"] for side, o in out.items()} == {
      "candidate": {"n": 3, "inputs_ms": 3.0, "beyond_ms": 4.5},
      "reference": {"n": 1, "inputs_ms": 0.0, "beyond_ms": 0.3}}
  nothing = {"n": 0, "inputs_ms": None, "beyond_ms": None}
  assert {side: o["said"] for side, o in gpu_steps.timing_calls_beyond([]).items()} == {
      "candidate": nothing, "reference": nothing}


def test_gpu_steps_sums_the_judges_exchanges_with_its_worker_per_command():
  """gpu_steps.message_costs over verdicts' evidence["messages"] (WorkerHandle._account), exact
  sums and per-message means; verdicts from before it, and malformed entries, count for
  nothing."""
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel
  said = lambda **cmds: {"evidence": {"messages": cmds}}
  rows = [said(run={"n": 6, "until_read_s": 0.06, "read_s": 0.012, "worker_s": 0.03,
                    "worker_send_s": 0.006, "views_dropped_s": 0.003},
               init={"n": 1, "until_read_s": 0.5, "worker_s": 0.25}),
          said(run={"n": 2, "until_read_s": 0.02, "read_s": 0.004, "worker_s": "x"},
               time="nonsense"),
          {"evidence": {}}, {}]
  assert gpu_steps.message_costs(rows) == {
      "init": {"n": 1, "until_read_s": 0.5, "worker_s": 0.25,
               "per_message_ms": {"until_read": 500.0, "worker": 250.0}},
      "run": {"n": 8, "until_read_s": 0.08, "read_s": 0.016, "worker_s": 0.03,
              "worker_send_s": 0.006, "views_dropped_s": 0.003,
              "per_message_ms": {"until_read": 10.0, "read": 2.0, "worker": 3.75,
                                 "worker_send": 0.75, "views_dropped": 0.375}}}
  assert gpu_steps.message_costs([]) == {}


def test_gpu_steps_bounds_a_timing_by_the_judges_clock():
  """gpu_steps.timing_wall_ratios: the timing step's held seconds over what the worker said its
  trials, warm-ups and audited calls took, exact values; verdicts without a timing count for
  nothing."""
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel
  timed = lambda problem, held_s, trials, ms, fence_s=None: {
      "problem": problem, "candidate_ms": ms,
      "evidence": {"gpu_seconds": {"candidate_timing": held_s},
                   "timing_trials": {"candidate": trials},
                   **({"fence_wait_s": {"candidate_timing": fence_s}} if fence_s else {})}}
  rows = [timed("a", 0.5, 20, 2.0),  # 25 calls of 2 ms: 50 ms said, 500 ms held
          timed("b", 1.25, 45, 10.0, fence_s=0.25),  # 50 calls of 10 ms, 1 s held
          timed("c", 0.4, 15, 8.0),  # 20 calls of 8 ms
          {"problem": "d", "candidate_ms": None, "evidence": {}}, {}]
  rows[0]["evidence"]["input_set_ms"] = 6.0  # 25 calls of 2 ms, each after 6 ms of inputs
  rows[2]["evidence"]["input_set_ms"] = 2.0
  assert gpu_steps.timing_wall_ratios(rows) == {
      "n": 3, "min": 2.0, "median": 2.5, "max": 10.0,
      "largest": [(10.0, "a"), (2.5, "c"), (2.0, "b")],
      "inputs_counted": {"n": 2, "min": 2.0, "median": 2.25, "max": 2.5,
                         "largest": [(2.5, "a"), (2.0, "c")]}}
  assert gpu_steps.timing_wall_ratios(rows, warmup=0, audits=0)["max"] == 12.5
  assert gpu_steps.timing_wall_ratios([]) == {"n": 0, "inputs_counted": {"n": 0}}


def test_gpu_steps_says_what_a_checks_exchange_holds_beyond_its_forwards():
  """gpu_steps.check_waits, exact values: from the messages where a verdict keeps them (the
  run commands' mean time to their replies), else from the reference's and the candidate's
  steps; the input sets counted where the judge timed them."""
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel
  rows = [
      # 6 runs, 60 ms to their replies: 10 ms each, less 3 + 2 ms of forwards, 2 x 1 ms of sets
      {"problem": "a", "candidate_ms": 3.0, "reference_ms": 2.0,
       "evidence": {"messages": {"run": {"n": 6, "until_read_s": 0.06}}, "input_set_ms": 1.0,
                    "gpu_seconds": {"candidate_run": 9.0, "reference_run": 9.0}}},
      # before the messages: 0.012 s of reference runs over 6 checks, 0.024 s of waits over 4
      {"problem": "a", "candidate_ms": 1.0, "reference_ms": 1.0,
       "evidence": {"gpu_seconds": {"candidate_run": 0.024, "reference_run": 0.012}}},
      {"problem": "b", "candidate_ms": 0.5, "reference_ms": 0.5,
       "evidence": {"gpu_seconds": {"candidate_run": 0.008, "reference_run": 0.0}}},
      {"problem": "c", "candidate_ms": None, "evidence": {"gpu_seconds": {"candidate_run": 1.0,
                                                                          "reference_run": 1.0}}},
      {"evidence": {}}, {}]
  assert gpu_steps.check_waits(rows) == {
      "n": 3, "inputs_counted": 1, "median_ms": 3.0, "min_ms": 1.0, "max_ms": 6.0,
      "per_problem_ms": {"a": 4.5, "b": 1.0}}
  assert gpu_steps.check_waits(rows[1:3], checks=2)["per_problem_ms"] == {"a": 13.0, "b": 3.0}
  assert gpu_steps.check_waits([]) == {"n": 0}


def test_the_gpu_steps_summary_counts_only_what_ran_under_the_hold(tmp_path):
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel
  verdict = lambda problem, **steps: {"problem": problem, "status": "correct",
                                      "evidence": {"gpu_seconds": steps}}
  rows = [dict(verdict("a", candidate_construct=9.0, candidate_init=1.0, compare=0.5,
                       release=0.25), correct=True, stage_seconds={"total": 4.0}),
          verdict("a", candidate_init=2.0, compare=0.25, reference_construct=4.0,
                  reference_checks=1.5),
          verdict("b", compare=0.125)]
  log = tmp_path / "v.jsonl"
  log.write_text("".join(json.dumps(r) + "\n" for r in rows))
  # (a judge's release is under its hold: it frees its memory before the next holder comes)
  assert gpu_steps.held_seconds(rows[0]) == 1.75 and gpu_steps.held_seconds(rows[1]) == 3.75
  summary = gpu_steps.summarize(gpu_steps.read_verdicts([str(log)], "^a$"))
  assert summary["num"] == 2 and summary["held_s_sum"] == 5.5
  # Logs stored gzipped under benchmarks/results read the same.
  stored = tmp_path / "v.jsonl.gz"
  stored.write_bytes(gzip.compress(log.read_bytes()))
  assert gpu_steps.read_verdicts([str(stored)], "^a$") == gpu_steps.read_verdicts([str(log)], "^a$")
  # Two runs of a batch, name by name.
  run = lambda *named: [{"name": n, "status": s, "stage": "done"} for n, s in named]
  assert gpu_steps.verdicts_differ(run(("x", "correct"), ("y", "correct")),
                                   run(("y", "correct"), ("x", "correct"))) == {
                                       "compared": 2, "only_one": [], "differ": []}
  assert gpu_steps.verdicts_differ(run(("x", "correct"), ("y", "correct")),
                                   run(("x", "incorrect"), ("z", "correct"))) == {
      "compared": 1, "only_one": ["y", "z"],
      "differ": [{"name": "x", "this": ("correct", "done"), "other": ("incorrect", "done")}]}
  assert summary["median_total_s"] == {"all": 4.0, "correct": 4.0}
  assert summary["triton_precompile"]["n"] == 0 and summary["triton_seed_planted"] == 0
  assert summary["steps"]["compare"] == {"n": 2, "sum": 0.8, "median": 0.375}
  a = summary["problems"]["a"]
  assert (a["n"], a["candidate_init"], a["reference_checks"], a["held_s"]) == (2, 1.5, 0.75, 2.75)
  smi = tmp_path / "smi.csv"
  smi.write_text("0 MiB, 0 %\n3000 MiB, 40 %\n9000 MiB, 60 %\nbad line\n")
  assert gpu_steps.smi_summary(str(smi)) == {"samples": 2, "peak_mib": 9000,
                                            "utilization_mean": 50.0, "utilization_median": 50.0}


def test_timings_beside_another_judges_context_start_up_are_told_from_those_clear_of_one():
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel

  def verdict(name, ms, alone, start, device=1.0, status="correct"):
    # a judge that started at `start` (its last hold ends 10 s later) and took `device` seconds
    # for its context; timed in `alone`
    holds = [[alone[0], alone[1], "alone"], [start + 9.0, start + 10.0, "shared"]]
    return {"name": name, "status": status, "candidate_ms": ms, "stage_seconds": {"total": 10.0},
            "evidence": {"gpu_holds": holds, "startup_seconds": {
                "judge": {"device": device}, "worker": {"device": device / 2}}}}
  rows = [verdict("k/0", 1.0, (100.0, 101.0), start=95.0),
          verdict("k/1", 1.1, (120.0, 121.0), start=111.0),   # beside k/3's start-up
          verdict("k/2", 0.9, (130.0, 131.0), start=121.0),
          verdict("k/3", 1.0, (140.0, 141.0), start=120.5),
          verdict("other/0", 5.0, (150.0, 151.0), start=141.0),  # alone: its own median
          verdict("k/4", 9.0, (0.0, 1.0), start=-9.0, status="incorrect")]
  assert gpu_steps._startup_window(rows[3]) == (120.5, 121.5)  # pylint: disable=protected-access
  result = gpu_steps.timings_beside_startups(rows)
  # k's median is 1.0 ms: k/1 +10%, beside; k/0 0%, k/2 -10%, k/3 0%, other/0 0%, clear
  assert result["beside_a_startup"] == {"n": 1, "median_pct": 10.0, "mean_pct": 10.0,
                                        "p90_pct": 10.0, "max_pct": 10.0}
  assert result["clear"] == {"n": 4, "median_pct": 0.0, "mean_pct": -2.5, "p90_pct": 0.0,
                             "max_pct": 0.0}


def test_the_gpu_holds_laid_side_by_side():
  """hold_timeline on hand-made holds: busy, alone and idle seconds, holders at once, and the
  alone holds that overlapped another (which the lock must never let happen)."""
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel
  holds = lambda *hs: {"evidence": {"gpu_holds": [list(h) for h in hs]}}
  rows = [holds((100.0, 102.0, "shared"), (104.0, 105.0, "alone")),
          holds((101.0, 103.0, "shared"), (106.0, 106.5, "shared")),
          holds((103.0, 103.5, "shared"), (103.0, 99.0, "shared"), (107.0, None, "alone")),
          {"evidence": {}}, {}]
  rows[0]["evidence"]["checks_alone"] = {"input_bytes": 1}  # too large to share the GPU
  assert gpu_steps.hold_timeline(rows) == {
      # 100-104 busy less nothing; 104-105 alone; 105-106 idle; 106-106.5 busy
      "holds": 5, "span_s": 6.5, "busy_s": 5.0, "alone_s": 1.0, "idle_s": 1.5,
      # 1 s alone over the 3 candidates with holds: at most 180 a minute
      "alone_large_problems_s": 1.0, "alone_per_candidate_s": 0.333, "per_minute_bound": 180.0,
      # 100-101: 1, 101-102: 2, 102-103: 1, 103-103.5: 1, 104-105: 1, 106-106.5: 1 -> 6 / 5
      "mean_holders_when_busy": 1.2, "max_holders": 2, "alone_overlapped": 0,
      # the shared holds, one slot each (no check width said): 2 slots in 101-102 only
      "slots_when_shared": {"1": 3.0, "2": 1.0}, "mean_slots_when_shared": 1.25}
  rows.append(holds((104.5, 104.8, "shared")))
  timeline = gpu_steps.hold_timeline(rows)
  assert timeline["alone_overlapped"] == 1 and timeline["max_holders"] == 2
  # within the timestamps' rounding is no overlap
  assert gpu_steps.hold_timeline([holds((1.0, 2.0, "alone"), (1.999, 3.0, "shared"))])[
      "alone_overlapped"] == 0
  assert gpu_steps.hold_timeline([holds((1.0, 2.0, "shared"))])["per_minute_bound"] is None
  assert gpu_steps.hold_timeline([{}]) == {"holds": 0}


def test_the_gaps_between_timings_and_the_checks_in_them():
  """timing_gaps on hand-made holds: the gaps between alone holds, the checks' seconds in them
  (their union), the idle rest, and a long gap through which the next timing had waited."""
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel
  holds = lambda *hs, waited=None: {"evidence": dict(
      {"gpu_holds": [list(h) for h in hs]},
      **({"fence_wait_s": {"timing": waited}} if waited is not None else {}))}
  rows = [holds((10.0, 11.0, "alone")),
          # asked at 10.5, before the gap 11-12 began: it waited through it
          holds((11.2, 11.6, "shared"), (11.4, 11.8, "shared"), (12.0, 12.5, "alone"),
                waited=1.5),
          holds((12.6, 12.7, "shared"), (12.8, 13.0, "alone"), waited=0.1),
          holds((20.0, 21.0, "shared"))]  # after the last timing: no gap
  expected = {
      "gaps": 2, "sum_s": 1.3, "median_s": 0.65, "p90_s": 0.3,
      # 11.2-11.8 and 12.6-12.7 held by checks; 11-11.2, 11.8-12 and 12.5-12.6 by nobody
      "checks_held_s": 0.7, "nobody_held_s": 0.6, "checks_started_median": 1.5,
      # Not told; the slot waits estimated (each timing's checks ended, then it waited for the
      # fence: 11.8 + 1.5 and 12.7 + 0.1, both at or past their hold's start: none)
      "startups_fenced_s": None, "next_timing_waited_for_slots_s": 0.0,
      "slot_waits_estimated": True,
      "over_0.4s": {"n": 1, "sum_s": 1.0, "another_timing_waited_through_s": 1.0,
                    "startups_fenced_s": None, "next_timing_waited_for_slots_s": 0.0}}
  assert gpu_steps.timing_gaps(rows) == expected
  # An estimate of 0.2 s: its checks ended at 11.5, its fence took 0.3 s, its hold began at 12.
  estimate = gpu_steps.timing_gaps([holds((10.0, 11.0, "alone")), holds(
      (11.0, 11.5, "shared"), (12.0, 12.5, "alone"), waited=0.3)])
  assert (estimate["next_timing_waited_for_slots_s"], estimate["slot_waits_estimated"]) == (
      0.2, True)
  # Told: start-ups held the fence 10.8-11.3 and 11.2-11.5 (a worker's), and 12.5-12.7; a
  # timing's own fence hold is no start-up; the timing at 12.0 asked for the slots at 11.7.
  rows[0]["evidence"]["fence_holds"] = [["device", 10.8, 11.3], ["timing", 11.9, 12.5]]
  rows[1]["evidence"]["fence_holds"] = [["worker_startup", 11.2, 11.5], ["upload", 12.5, 12.7]]
  rows[1]["evidence"]["alone_asked"] = [[11.7, 12.0]]
  told = gpu_steps.timing_gaps(rows)
  assert told["startups_fenced_s"] == 0.7 and told["next_timing_waited_for_slots_s"] == 0.3
  assert told["slot_waits_estimated"] is False
  assert (told["over_0.4s"]["startups_fenced_s"], told["over_0.4s"][
      "next_timing_waited_for_slots_s"]) == (0.5, 0.3)
  assert gpu_steps.timing_gaps([holds((1.0, 2.0, "alone"))]) == {"gaps": 0}
  # The reference measured first (alone at 12.0) before the checks: the timing's fence wait is
  # its candidate's timing's (at 13.5, asked at 12.0, through the gap 12.3-13.5), not the
  # reference's (which would put its asking at 10.5, through the gap 11-12).
  first = gpu_steps.timing_gaps([holds((10.0, 11.0, "alone")), holds(
      (12.0, 12.3, "alone"), (12.4, 12.6, "shared"), (13.5, 13.8, "alone"), waited=1.5)])
  assert first["over_0.4s"]["another_timing_waited_through_s"] == 1.2
  assert first["next_timing_waited_for_slots_s"] == 0.0  # 12.6 + 1.5, past 13.5


def test_the_workers_a_batch_started_by_why():
  """new_workers on hand-made verdicts of two judge processes, in a shuffled order: each new
  worker's reason read from its judge's previous job, and its fenced start-up seconds."""
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel

  def job(pid, number, start, correct=True, served=None, fresh=False, device=1.0):
    evidence = {"judge_process": {"pid": pid, "job": number}, "worker_start": start,
                "startup_seconds": {"worker": {"device": device, "observers": 0.25}}}
    if served is not None:
      evidence["worker_reuse"] = {"served": served, "kept": True}
    if fresh:
      evidence["worker_choice"] = {"pass_rate": 0.2, "fresh_worker": True}
    return {"correct": correct, "evidence": evidence}

  rows = [job(1, 1, "fork"), job(1, 2, "kept", served=1),
          job(1, 3, "forkserver", device=2.0),  # its kept worker served 2 of 2
          job(1, 4, "forkserver", fresh=True, correct=False),
          job(1, 5, "forkserver"),  # after job 4's failure
          job(1, 6, "forkserver", device=1.5),  # after a worker that served 1 of 2: not told
          job(2, 1, "forkserver", correct=False), job(2, 2, "fork"), {"evidence": {}}]
  got = gpu_steps.new_workers(rows[::-1], per_worker=2)
  assert got == {"kept": 1,
                 "started": {"after_a_failure": 2, "first_job": 2, "fresh_by_pass_rate": 1,
                             "other": 1, "served_all": 1},
                 "fenced_s": {"after_a_failure": 2.5, "first_job": 2.5,
                              "fresh_by_pass_rate": 1.2, "other": 1.8, "served_all": 2.2}}
  assert gpu_steps.new_workers([]) == {"kept": 0, "started": {}, "fenced_s": {}}


def test_the_slots_the_shared_holds_took_laid_side_by_side():
  """hold_timeline's slot counts on hand-made holds that record their slots (the 4th field):
  the seconds in which the shared holders took 1, 2, ... slots in all, none while a hold alone
  runs; a shared hold that did not say (verdicts before 2026-12-06) took its judge's check
  width, or 1."""
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel
  holds = lambda *hs: {"evidence": {"gpu_holds": [list(h) for h in hs]}}
  rows = [holds((0.0, 2.0, "shared", 2), (3.0, 4.0, "alone", 4)),
          holds((1.0, 3.0, "shared", 1), (4.0, 5.0, "shared", 4))]
  timeline = gpu_steps.hold_timeline(rows)
  # 0-1: 2 slots; 1-2: 2 + 1; 2-3: 1; 3-4: alone (not counted); 4-5: 4 (taken as 3-4 ended)
  assert timeline["slots_when_shared"] == {"1": 1.0, "2": 1.0, "3": 1.0, "4": 1.0}
  assert timeline["mean_slots_when_shared"] == 2.5
  assert timeline["busy_s"] == 5.0 and timeline["alone_s"] == 1.0
  assert timeline["max_holders"] == 2 and timeline["alone_overlapped"] == 0
  rows.append(holds((6.0, 7.0, "shared"), (8.0, 9.0, "shared")))
  assert gpu_steps.hold_timeline(rows)["slots_when_shared"] == {
      "1": 3.0, "2": 1.0, "3": 1.0, "4": 1.0}
  rows[-1]["evidence"]["check_width"] = {"width": 3}
  assert gpu_steps.hold_timeline(rows)["slots_when_shared"] == {
      "1": 1.0, "2": 1.0, "3": 3.0, "4": 1.0}
  assert gpu_steps.hold_timeline(rows)["mean_slots_when_shared"] == 2.67
  assert "slots_when_shared" not in gpu_steps.hold_timeline([holds((0.0, 1.0, "alone", 4))])


def test_a_candidates_waits_for_the_fence_beside_its_build_by_level():
  """fence_waits_by_level re-derived by hand: medians over the correct verdicts only, each
  figure over the verdicts that have it."""
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel
  def verdict(problem, upload, prebuild, build, timing, total, status="correct"):
    return {"status": status, "problem": problem,
            "stage_seconds": {"build": build, "total": total},
            "evidence": {"fence_wait_s": {k: v for k, v in (("upload", upload),
                                                             ("timing", timing)) if v},
                         "cuda_prebuild": {"seconds": prebuild}}}
  rows = [verdict("level1/19_ReLU", 5.0, 2.0, 5.5, 6.0, 13.0),
          verdict("level1/20_LeakyReLU", 3.0, 3.0, 4.0, None, 9.0),
          verdict("level1/21_Sigmoid", None, 2.5, 3.0, 2.0, 7.0),
          verdict("level1/22_Tanh", 9.0, 9.0, 9.0, 9.0, 99.0, status="incorrect"),
          verdict("level2/12_Gemm", 7.0, 3.0, 8.0, 7.5, 20.0)]
  out = gpu_steps.fence_waits_by_level(rows)
  assert out["level1"] == {"candidates": 3, "upload_fence_wait": {"n": 2, "median": 4.0},
                           "prebuild": {"n": 3, "median": 2.5},
                           "build_stage": {"n": 3, "median": 4.0},
                           "timing_fence_wait": {"n": 2, "median": 4.0},
                           "total": {"n": 3, "median": 9.0}}
  assert out["level2"]["upload_fence_wait"] == {"n": 1, "median": 7.0}
  assert gpu_steps.fence_waits_by_level([]) == {}


def test_the_forwards_alone_counted_from_the_times_a_run_measured():
  """forward_floor re-derived by hand on two verdicts: one correct candidate whose judge timed
  and checked the reference itself, one that failed its checks."""
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel
  correct = {"status": "correct", "candidate_ms": 2.0, "reference_ms": 4.0,
             "num_correct_trials": 5,
             "evidence": {"gpu_seconds": {"reference_timing": 1.0, "reference_checks": 0.5,
                                          "candidate_timing": 1.0},
                          "timing_trials": {"reference": 20, "candidate": 40},
                          "gpu_holds": [[10.0, 12.0, "shared"], [12.0, 14.0, "alone"]]}}
  wrong = {"status": "incorrect", "candidate_ms": None, "reference_ms": 4.0,
           "num_correct_trials": 2,
           "evidence": {"gpu_seconds": {"candidate_run": 0.1},
                        "gpu_holds": [[14.0, 15.0, "shared"]]}}
  floor = gpu_steps.forward_floor([correct, wrong, {"evidence": {}}], warmup=3, audits=2)
  timing = (40 + 3 + 2) * 2.0  # the candidate's trials, warm-ups and audited calls: 90 ms
  reference_timing = (20 + 3) * 4.0  # 92 ms
  # correct: 5 checks and the last one, each both forwards; the audits' references; the
  # reference checks' three forwards. wrong: its 2 checks' reference forwards (no time of its own)
  checks = 6 * (2.0 + 4.0) + 2 * 4.0 + 3 * 4.0 + 2 * 4.0  # 64 ms
  forward_s = (timing + reference_timing + checks) / 1000
  assert floor == {"candidates": 2, "forward_s": round(forward_s, 1),
                   "candidate_timing_s": 0.1, "reference_timing_s": 0.1, "checks_s": 0.1,
                   "busy_s": 5.0, "forward_share_of_busy": round(forward_s / 5.0, 3),
                   "per_minute_bound": round(60 * 2 / forward_s, 1)}
  assert gpu_steps.forward_floor([{}])["per_minute_bound"] is None


def test_what_timing_calls_cost_beyond_their_measured_time_by_hand():
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel
  # 40 trials + 3 warm-ups + 2 audits at 2 ms in a 1.0 s step: (1000 - 90) / 45 ms a call;
  # the reference's 20 + 3 at 4 ms in 0.5 s, 0.04 s of it waiting for the fence: (460 - 92) / 23
  first = {"candidate_ms": 2.0, "reference_ms": 4.0,
           "evidence": {"gpu_seconds": {"candidate_timing": 1.0, "reference_timing": 0.5},
                        "fence_wait_s": {"reference_timing": 0.04},
                        "timing_trials": {"candidate": 40, "reference": 20},
                        "timing_loop_ms": {"candidate": {"inputs_ms": 2.5, "beyond_ms": 3.0}}}}
  # 10 + 5 calls at 10 ms in 0.2 s: (200 - 150) / 15; its reference's time was reused
  second = {"candidate_ms": 10.0, "reference_ms": 4.0,
            "evidence": {"gpu_seconds": {"candidate_timing": 0.2},
                         "timing_trials": {"candidate": 10, "reference": 7}}}
  out = gpu_steps.timing_calls_beyond([first, second, {"evidence": {}}, {}])
  nothing = {"n": 0, "inputs_ms": None, "beyond_ms": None}
  assert out["candidate"] == {"n": 2, "median_ms": round(((910 / 45) + (50 / 15)) / 2, 3),
                              "said": {"n": 1, "inputs_ms": 2.5, "beyond_ms": 3.0}}
  assert out["reference"] == {"n": 1, "median_ms": round(368 / 23, 3), "said": nothing}
  assert gpu_steps.timing_calls_beyond([]) == {
      "candidate": {"n": 0, "median_ms": None, "said": nothing},
      "reference": {"n": 0, "median_ms": None, "said": nothing}}

def test_gpu_memory_held_outside_the_holds_is_told_by_role(tmp_path):
  """memory_outside_holds on hand-made samples: a judge's and a worker's MiB above their context
  while they held no slot (the sample at 10.2 s is within the hold's slack), and the samples
  gpu_apps.py parses from nvidia-smi's answer."""
  from benchmarks import gpu_apps  # pylint: disable=import-outside-toplevel
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel
  assert gpu_apps.parse("101, 3000\nNo running processes found\n7, x\n", 5.0) == [
      (5.0, 101, 3000)]
  rows = [{"evidence": {"judge_process": {"pid": 1}, "worker_pid": 2,
                        "gpu_holds": [[10.0, 12.0, "shared"]]}},
          {"evidence": {"judge_process": {"pid": 1}, "worker_pid": 3,
                        "gpu_holds": [[20.0, 21.0, "alone"]],
                        # a kept worker's failure, judged again in the same judge process
                        "judged_again": {"worker_pid": 4, "gpu_holds": [[30.0, 31.0, "shared"]]}}},
          # judged again alone after running out of memory in a new worker, which was itself
          # the judging again of a kept worker's failure
          {"evidence": {"judge_process": {"pid": 5}, "worker_pid": 6,
                        "gpu_holds": [[40.0, 41.0, "alone"]],
                        "shared_gpu_oom_attempt": {
                            "judge_process": {"pid": 5}, "worker_pid": 7,
                            "judged_again": {"worker_pid": 8,
                                             "gpu_holds": [[35.0, 36.0, "shared"]]}}}}]
  ctx = gpu_steps.CONTEXT_MIB
  samples = [(5.0, 1, ctx + 100), (5.0, 2, ctx + 6000), (5.0, 3, ctx + 10),
             (11.0, 1, ctx + 20000), (11.0, 2, ctx + 20000),  # both in their hold
             (12.2, 2, ctx + 500), (15.0, 2, ctx + 30000), (15.0, 3, ctx + 1000),
             (15.0, 9, 50000),  # no verdict's process
             (30.5, 1, ctx + 25000), (30.5, 4, ctx + 7000),  # in the failed attempt's hold
             (35.5, 5, ctx + 9000), (35.5, 8, ctx + 3000)]  # in the first of two attempts'
  out = gpu_steps.memory_outside_holds(rows, samples)
  assert out["samples"] == 6
  assert out["judge"] == {"processes": 2, "outside_holds_peak_sum_mib": 100,
                          "outside_holds_largest": [1, ctx + 100, 0.0]}
  assert out["worker"] == {"processes": 6, "outside_holds_peak_sum_mib": 31000,
                           "outside_holds_largest": [2, ctx + 30000, 10.0]}
  assert gpu_steps.memory_outside_holds(rows, []) == {"samples": 0}
  apps = tmp_path / "apps.csv"
  apps.write_text("5.000,1,1124\nbroken\n6.5,2,x\n7.250,2,900\n")
  assert gpu_steps.read_apps(str(apps)) == [(5.0, 1, 1124), (7.25, 2, 900)]


def test_the_processes_an_out_of_memory_message_lists_are_told_by_role():
  """oom_processes on hand-made verdicts: a failed attempt judged again (its holds and worker
  pid kept), a judge that held a slot at that attempt's last hold's end and one that did not,
  a worker, a process no verdict names, and processes under the threshold left out."""
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel
  message = ("correctness: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 "
             "GiB. GPU 0 has a total capacity of 139.80 GiB of which 1.72 GiB is free. Process "
             "11 has 20.20 GiB memory in use. Process 12 has 880.00 MiB memory in use. Process "
             "13 has 30.55 GiB memory in use. Process 99 has 4.70 GiB memory in use. Process 21 "
             "has 12.86 GiB memory in use. Including non-PyTorch memory, this process has ...")
  rows = [{"name": "a", "reasons": [], "evidence": {
              "judge_process": {"pid": 11}, "worker_pid": 22,
              "judged_again": {"reasons": [message], "worker_pid": 21,
                               "gpu_holds": [[100.0, 101.0, "shared"], [103.0, 104.0, "alone"]]}}},
          {"name": "b", "evidence": {"judge_process": {"pid": 12}, "worker_pid": 23,
                                     "gpu_holds": [[90.0, 95.0, "shared"]]}},
          {"name": "c", "evidence": {"judge_process": {"pid": 13}, "worker_pid": 24,
                                     "gpu_holds": [[103.8, 106.0, "shared"]]}}]
  assert gpu_steps.oom_processes(rows) == [{"candidate": "a", "asked_gib": 6.0, "processes": [
      [11, 20.2, "judge", True],     # its own judge, in the failed attempt's hold
      [13, 30.6, "judge", True],     # a judge holding a slot at 104.0
      [99, 4.7, "unknown", None],
      [21, 12.9, "worker", True]]}]  # the failed attempt's worker
  rows[2]["evidence"]["gpu_holds"] = [[110.0, 111.0, "shared"]]
  assert gpu_steps.oom_processes(rows)[0]["processes"][1] == [13, 30.6, "judge", False]
  assert gpu_steps.oom_processes(rows[1:]) == []


def test_what_judges_and_workers_kept_after_a_release():
  """left_after_release on hand-made evidence: the largest of each side in MiB, and the releases
  that left more than a model's parameters (MIB_LEFT_OK) on either side; a worker that did not
  say (None) counts for neither."""
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel
  mib = 2**20
  left = lambda *pairs: {"evidence": {"left_after_release": [list(p) for p in pairs]}}
  rows = [left((10 * mib, 0), (0, 12 * 1024 * mib)), left((2048 * mib, None)), {"evidence": {}}]
  assert gpu_steps.left_after_release(rows) == {
      "releases": 3, "judge_max_mib": 2048.0, "worker_max_mib": 12288.0, "over_ok": 2}
  assert gpu_steps.left_after_release([left((mib, mib))])["over_ok"] == 0
  assert gpu_steps.left_after_release([{}]) == {
      "releases": 0, "judge_max_mib": None, "worker_max_mib": None, "over_ok": 0}


def test_the_throughput_benchmark_sums_up_the_fused_comparison():
  from benchmarks.sandbox_throughput import fused_compare_summary  # pylint: disable=import-outside-toplevel
  rows = [{"evidence": {"fused_compare": {"compile_s": 0.2, "join_s": 0.0, "load_s": 3.0,
                                          "fused": 8, "fallbacks": 1}}},
          {"evidence": {"fused_compare": {"compile_s": 0.4, "join_s": 1.0, "load_s": 5.0,
                                          "fused": 2, "fallbacks": 0}}},
          {"evidence": {"fused_compare": {"compile_s": 0.3, "join_s": 0.5,
                                          "error": "NVRTC compile: x"}}},
          {"evidence": {}}]
  assert fused_compare_summary(rows) == {
      "judges": 3, "median_compile_s": 0.3, "median_join_s": 0.5, "median_load_s": 4.0,
      "fused": 10, "fallbacks": 1, "errors": ["NVRTC compile: x"]}


def test_the_throughput_benchmark_counts_jobs_per_judge_process():
  from benchmarks.sandbox_throughput import judge_processes  # pylint: disable=import-outside-toplevel
  row = lambda pid, job, device, start: {"evidence": {
      "judge_process": {"pid": pid, "job": job}, "worker_start": start,
      "startup_seconds": {"judge": {"device": device}}}}
  rows = [row(7, 1, 9.0, "fork"), row(7, 2, 0.0, "forkserver"), row(7, 3, 0.5, "forkserver"),
          row(8, 1, 7.0, "fork"), row(8, 2, 0.25, "spawn"),
          {"evidence": {}}, {"evidence": None}]  # verdicts no judge wrote
  # Two looks of kept workers (SandboxConfig.candidates_per_worker): one kept, one not.
  rows[1]["evidence"]["worker_reuse"] = {"served": 1, "drift": [], "park_s": 0.3, "check_s": 0.2,
                                         "kept": True}
  rows[2]["evidence"]["worker_reuse"] = {"served": 2, "drift": ["a thread"], "park_s": 0.5,
                                         "check_s": 0.4, "kept": False}
  rows[2]["evidence"]["worker_start"] = "kept"
  assert judge_processes(rows) == {
      "jobs": 5, "processes": 2, "later_jobs": 3,
      "worker_starts": {"fork": 2, "forkserver": 1, "kept": 1, "spawn": 1},
      "first_device_s": 8.0, "later_device_s": 0.25,
      "kept_workers": {"looked": 2, "kept": 1, "park_s": 0.4, "check_s": 0.3,
                       "not_kept_because": {"a thread": 1}}}


def test_a_judge_lost_with_the_server_leaves_no_result_behind(tmp_path):
  """ZygoteLauncher.run: before the plain judge runs again, what the lost judge wrote goes, its
  half-written result too (atomic_file's temporary file, named for its process)."""
  from kernelzero_jax.sandbox import launchers  # pylint: disable=import-outside-toplevel
  result = tmp_path / "result.json"
  kept = tmp_path / "result.json.keep"
  for path in (result, tmp_path / "result.json.4242.tmp", tmp_path / "result.json.tmp", kept):
    path.write_text("{}")
  launcher = launchers.ZygoteLauncher(device="cpu")

  def lost(*args):
    raise launchers.ZygoteUnavailable("the server died")

  seen = []
  launcher._run = lost  # pylint: disable=protected-access
  launcher._discard = lambda server: None  # pylint: disable=protected-access
  launcher._plain = types.SimpleNamespace(  # pylint: disable=protected-access
      run=lambda *args: seen.append(sorted(p.name for p in tmp_path.iterdir())) or (0, False))
  assert launcher.run("job", str(result), str(tmp_path / "log"), str(tmp_path), "n", 1.0) == (
      0, False)
  assert seen == [["log", "result.json.keep"]]
