"""The worker's runtime guard (audit hooks), exercised in a fresh interpreter: hooks are
irreversible, so they must never be installed in the test process itself."""

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_SCRIPT = r'''
import json, os, sys, threading
from kernelzero_jax.sandbox.guard import Guard

workdir, outside = sys.argv[1], sys.argv[2]
cand = os.path.join(workdir, "candidate.py")
guard = Guard(workdir, cand)
guard.install()
results = {}

def attempt(name, code):
  before = len(guard.violations)
  try:
    exec(compile(code, cand, "exec"), {"os": os, "threading": threading, "subprocess": __import__("subprocess")})
    results[name] = "allowed"
  except PermissionError:
    results[name] = "blocked"
  results[name] += ":" + str(len(guard.violations) - before)

attempt("write_outside", f"open({outside!r}, 'w').write('x')")
attempt("write_inside", f"open({os.path.join(workdir, 'ok.txt')!r}, 'w').write('x')")
attempt("read_outside", f"open({json.__file__!r}).read()")
attempt("kill_parent", "os.kill(os.getppid(), 0)")
attempt("signal_self", "os.kill(os.getpid(), 0)")
attempt("popen_shell", "subprocess.Popen(['true']).wait()")
attempt("system", "os.system('true')")
attempt("thread_joined", "t = threading.Thread(target=lambda: None); t.start(); t.join()")
attempt("patch_function_code", "threading.Thread.start.__code__ = (lambda self: None).__code__")
attempt("remove_outside", f"os.remove({outside!r})")
# Harness code (not the candidate's file) may start threads; they are not counted.
before = len(guard.violations)
t = threading.Thread(target=lambda: None); t.start(); t.join()
results["harness_thread"] = str(len(guard.violations) - before)
print(json.dumps(results))
'''


def test_guard_blocks_escapes_from_candidate_code_only(tmp_path):
  workdir = tmp_path / "work"
  workdir.mkdir()
  outside = tmp_path / "outside.txt"
  outside.write_text("keep")
  proc = subprocess.run([sys.executable, "-c", _SCRIPT, str(workdir), str(outside)], cwd=REPO,
                        capture_output=True, text=True, timeout=120,
                        env=dict(os.environ, PYTHONPATH=REPO))
  assert proc.returncode == 0, proc.stderr
  results = json.loads(proc.stdout.strip().splitlines()[-1])
  assert results == {
      "write_outside": "blocked:1", "write_inside": "allowed:0", "read_outside": "allowed:0",
      "kill_parent": "blocked:1", "signal_self": "allowed:0", "popen_shell": "blocked:1",
      "system": "blocked:1", "thread_joined": "allowed:1", "patch_function_code": "blocked:1",
      "remove_outside": "blocked:1", "harness_thread": "0"}
  assert outside.read_text() == "keep"
