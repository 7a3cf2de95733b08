"""Checkpoint round trip, retention, and kill-and-resume of a small training run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from kernelzero_jax.metrics import MetricsWriter, StepTotals, read_metrics
from kernelzero_jax.model.config import PRESETS
from kernelzero_jax.model.qwen2 import Qwen2
from kernelzero_jax.rl import train_step as ts
from kernelzero_jax.rl.checkpointing import Checkpointer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "tests", "resume_run.py")


def _state(seed):
  optimizer = ts.make_optimizer(ts.OptimizerConfig(learning_rate=1e-3))
  _, state = ts.init_train_state(Qwen2(PRESETS["tiny"], rngs=nnx.Rngs(seed)), optimizer, seed)
  # Non-trivial optimizer moments and step.
  opt_state = jax.tree.map(lambda x: x + 0.5 if x.dtype == jnp.float32 else x, state.opt_state)
  return state.replace(opt_state=opt_state, step=jnp.asarray(7, jnp.int32))


def _assert_tree_equal(a, b):
  assert jax.tree.structure(a) == jax.tree.structure(b)
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    assert x.dtype == y.dtype
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_round_trip_and_keep_last_n(tmp_path):
  states = {s: _state(s) for s in (1, 2, 3)}
  with Checkpointer(str(tmp_path), max_to_keep=2) as ckpt:
    assert ckpt.latest_step() is None
    assert ckpt.restore_latest(states[1]) is None
    for s, state in states.items():
      ckpt.save(s, state, {"step": s, "frontier": ["a", {"b": 1.5}]})
  with Checkpointer(str(tmp_path), max_to_keep=2) as ckpt:
    assert ckpt.latest_step() == 3
    assert ckpt.all_steps() == [2, 3]
    abstract = jax.eval_shape(lambda: states[1])
    state, learner = ckpt.restore_latest(abstract)
    _assert_tree_equal(state, states[3])
    assert learner == {"step": 3, "frontier": ["a", {"b": 1.5}]}
    state2, _ = ckpt.restore(2, abstract)
    _assert_tree_equal(state2, states[2])


def test_step_totals_add_up_a_steps_rounds_and_start_afresh_on_the_next():
  totals = StepTotals()
  assert (totals.step, totals.values) == (None, {})
  totals.add(3, n=2, seconds=0.5, rates=[0.25])
  totals.add(3, n=1, seconds=1.0, rates=[])
  assert (totals.step, totals.values) == (3, {"n": 3, "seconds": 1.5, "rates": [0.25]})
  totals.add(4, n=5, rates=[1.0])
  assert (totals.step, totals.values) == (4, {"n": 5, "rates": [1.0]})


def test_metrics_writer_drops_steps_after_resume(tmp_path):
  with MetricsWriter(str(tmp_path)) as w:
    for s in (1, 2, 3):
      w.write(s, {"loss": np.float32(s) / 3, "n": jnp.asarray(s)})
  with open(tmp_path / "metrics.jsonl", "a") as f:
    f.write('{"step": 4, "lo')  # torn line of a killed run
  with MetricsWriter(str(tmp_path), resume_step=2) as w:
    w.write(3, {"loss": 9.0})
  records = read_metrics(str(tmp_path / "metrics.jsonl"))
  assert [r["step"] for r in records] == [1, 2, 3]
  assert records[2]["loss"] == 9.0 and records[1]["n"] == 2
  assert os.listdir(tmp_path / "tb")


def _run(workdir, steps=6):
  return subprocess.Popen([sys.executable, SCRIPT, str(workdir), "--steps", str(steps)],
                          cwd=REPO, env={**os.environ, "PYTHONPATH": REPO})


def test_kill_and_resume_matches_uninterrupted_run(tmp_path):
  ref_dir, kill_dir = tmp_path / "ref", tmp_path / "killed"
  ref = _run(ref_dir)
  victim = _run(kill_dir)
  deadline = time.time() + 120
  while not any(r["step"] >= 3 for r in read_metrics(str(kill_dir / "metrics.jsonl"))):
    assert victim.poll() is None, "the run ended before it was killed"
    assert time.time() < deadline
    time.sleep(0.05)
  os.kill(victim.pid, signal.SIGKILL)
  victim.wait()
  killed_at = max(r["step"] for r in read_metrics(str(kill_dir / "metrics.jsonl")))
  assert killed_at < 6
  assert _run(kill_dir).wait(timeout=120) == 0
  assert ref.wait(timeout=120) == 0

  want = read_metrics(str(ref_dir / "metrics.jsonl"))
  got = read_metrics(str(kill_dir / "metrics.jsonl"))
  assert [r["step"] for r in want] == [1, 2, 3, 4, 5, 6]
  assert [r["step"] for r in got] == [1, 2, 3, 4, 5, 6]
  for w, g in zip(want, got):
    for k in ("loss", "grad_norm", "param_norm", "update_norm", "learning_rate", "approx_kl"):
      assert abs(w[k] - g[k]) <= 1e-6, (w["step"], k, w[k], g[k])
  with Checkpointer(str(kill_dir)) as ckpt:
    assert ckpt.latest_step() == 6
