"""The co-evolution loop (the main job) end to end on tiny policies, with a kill."""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from kernelzero_jax import configs
from kernelzero_jax.coevolve import CoevolveConfig, format_phase_summary
from kernelzero_jax.rl.checkpointing import Checkpointer
from kernelzero_jax.rl.learner import LearnerConfig

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(REPO, "kernelzero_jax", "examples")


def test_global_steps_alternate_phases_round_by_round():
  config = CoevolveConfig(num_rounds=2, proposer=LearnerConfig(num_steps=2,
                                                               reward_schedule="environment"),
                          coder=LearnerConfig(num_steps=3))
  assert config.total_steps == 10
  assert [config.locate(g) for g in range(1, 11)] == [
      (1, "proposer", 1), (1, "proposer", 2), (1, "coder", 1), (1, "coder", 2), (1, "coder", 3),
      (2, "proposer", 3), (2, "proposer", 4), (2, "coder", 4), (2, "coder", 5), (2, "coder", 6)]


@pytest.mark.parametrize("override, message", [
    (dict(proposer=dict(reward_schedule="ca_grpo")), "proposer.reward_schedule must be"),
    (dict(apis=("relu", "frobnicate")), "not in the catalog: \\['frobnicate'\\]"),
    (dict(num_rounds=0), "num_rounds"),
    (dict(frontier=dict(samples_per_module=4)), "samples_per_module"),
])
def test_bad_configs_are_refused_with_the_reason(override, message):
  with pytest.raises(configs.ConfigError, match=message):
    configs.from_mapping(CoevolveConfig, configs.config_dict(CoevolveConfig, **override))


@pytest.mark.parametrize("name", ["coevolve_tiny", "coevolve_gpu_random", "coevolve_qwen7b"])
def test_every_coevolve_config_builds_and_documents_its_command(name):
  module = importlib.import_module(f"experiments.configs.{name}")
  config = configs.from_mapping(CoevolveConfig, module.get_config())
  assert config.proposer.reward_schedule == "environment"
  assert f"python -m experiments.coevolve --config=experiments/configs/{name}.py" in " ".join(
      module.__doc__.split())


FLAGS = ["--config.num_rounds=2", "--config.proposer.num_steps=1", "--config.coder.num_steps=1",
         "--config.proposer.rollout.max_new_tokens=16", "--config.coder.rollout.max_new_tokens=16",
         "--config.prompt_style=compact", f"--config.cooccurrence={EXAMPLES}",
         "--config.seed_teacher_modules=0", "--config.coder.rollout.prompts_per_step=2",
         "--config.apis=('relu', 'sum', 'add', 'mul')",
         # With no reward signal (random policies), weight decay still moves the parameters, so
         # a resumed run that skipped or repeated an update would end elsewhere.
         "--config.proposer.optimizer.weight_decay=0.1",
         "--config.coder.optimizer.weight_decay=0.1"]


def _command(workdir, kernelbench):
  """The main job on the tiny config, made smaller, with a KernelBench evaluation per round on
  a one-problem directory."""
  return [sys.executable, "-m", "experiments.coevolve",
          "--config=experiments/configs/coevolve_tiny.py", f"--workdir={workdir}", *FLAGS,
          f"--config.eval.kernelbench_dir={kernelbench}", "--config.eval.levels=(1,)",
          "--config.eval.max_new_tokens=16"]


def _one_problem_kernelbench(root):
  (root / "level1").mkdir(parents=True)
  with open(os.path.join(EXAMPLES, "scaled_relu_reference.py")) as f:
    (root / "level1" / "1_ScaledReLU.py").write_text(f.read())
  return root


def _final(workdir):
  """(step, state tree, JSON state) of the latest checkpoint, read without a template."""
  with Checkpointer(str(workdir)) as ckpt:
    step = ckpt.latest_step()
    raw = ckpt._manager.restore(step, args=ocp.args.Composite(  # pylint: disable=protected-access
        state=ocp.args.StandardRestore(), learner=ocp.args.JsonRestore()))
  return step, raw["state"], dict(raw["learner"])


@pytest.mark.timeout(900)
def test_coevolution_trains_both_policies_checkpoints_the_pool_and_resumes_after_a_kill(tmp_path):
  kernelbench = _one_problem_kernelbench(tmp_path / "kernelbench")
  whole = tmp_path / "whole"
  proc = subprocess.run(_command(whole, kernelbench), cwd=REPO, capture_output=True, text=True,
                        timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]

  # The console gives a summary per phase and says plainly what the policies achieved (here:
  # nothing; 16 new tokens are too few for the warm-started Coder to finish a kernel).
  assert proc.stdout.count("round 1 proposer: 1 steps, 8 samples; valid 0 (0%)") == 1
  assert "round 2 coder: 1 steps, 8 samples; Coder accuracy 0%" in proc.stdout
  assert ("co-evolution: the Proposer wrote 0 valid modules in 16 proposals (0 joined the pool); "
          "the Coder wrote 0 correct kernels in 16 samples; pool 2 modules, frontier 0"
          in proc.stdout)
  assert "neither policy succeeded once" in proc.stderr

  records = [json.loads(line) for line in open(whole / "metrics.jsonl")]
  assert [(r["step"], r["round"], r["phase"], r["policy_step"]) for r in records] == [
      (1, 1, "proposer", 1), (2, 1, "coder", 1), (3, 2, "proposer", 2), (4, 2, "coder", 2)]
  for r in records:
    phase = r["phase"]
    assert r[f"{phase}/learning_rate"] > 0 and r[f"{phase}/update_norm"] > 0
  assert records[0]["proposer/count_by_status/no_module"] == 8  # random text holds no module
  assert records[0]["proposer/reward_mean"] == -0.5
  assert records[1]["coder/count_by_status/format_error"] == 8
  assert records[1]["coder/env/pool_size"] == 2  # the package's two example references

  phases = json.load(open(whole / "phases.json"))
  assert [(p["round"], p["phase"]) for p in phases] == [(1, "proposer"), (1, "coder"),
                                                        (2, "proposer"), (2, "coder")]
  assert phases[0]["status_counts"] == {"no_module": 8} and phases[0]["validity_rate"] == 0.0
  assert phases[1]["accuracy"] == 0.0 and phases[1]["pool_size"] == 2
  assert format_phase_summary(phases[0]).startswith("round 1 proposer: 1 steps, 8 samples")
  for phase in ("proposer", "coder"):
    assert sorted(os.listdir(whole / phase / "samples")) == ["step_000001.jsonl",
                                                             "step_000002.jsonl"]

  # One checkpoint holds both policies, each after its own 2 optimizer steps, and the pool.
  step, state, saved = _final(whole)
  assert step == 4 and saved["global_step"] == 4
  assert int(state["proposer"]["step"]) == 2 and int(state["coder"]["step"]) == 2
  assert len(saved["pool"]["entries"]) == 2
  # The Coder's 2 steps x 2 modules x 4 samples are recorded in the pool, none correct.
  assert sum(e["attempts"] for e in saved["pool"]["entries"]) == 16
  assert sum(e["correct"] for e in saved["pool"]["entries"]) == 0
  summary = json.load(open(whole / "summary.json"))
  assert summary["pool_size"] == 2 and len(summary["phases"]) == 4
  # KernelBench after each round, with the Coder of that round.
  for rnd in (1, 2):
    verdicts = [json.loads(line) for line in open(whole / "eval" / f"round_{rnd}" /
                                                   "verdicts.jsonl")]
    assert [(v["problem_id"], v["status"]) for v in verdicts] == [(1, "format_error")]
    assert os.path.exists(whole / "eval" / f"round_{rnd}" / "report.md")

  # Killed after its second checkpoint, then started again: the same end as the whole run.
  killed = tmp_path / "killed"
  runner = subprocess.Popen(_command(killed, kernelbench), cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
  try:
    deadline = time.time() + 600
    while not os.path.isdir(killed / "checkpoints" / "2") and time.time() < deadline:
      assert runner.poll() is None, "the run ended before it could be killed"
      time.sleep(0.2)
    assert os.path.isdir(killed / "checkpoints" / "2")
  finally:
    os.killpg(runner.pid, signal.SIGKILL)
    runner.wait()
  assert not os.path.exists(killed / "summary.json")
  proc = subprocess.run(_command(killed, kernelbench), cwd=REPO, capture_output=True, text=True,
                        timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "resumed after global step" in proc.stderr

  assert [json.loads(line)["step"] for line in open(killed / "metrics.jsonl")] == [1, 2, 3, 4]
  step_k, state_k, saved_k = _final(killed)
  assert step_k == 4 and saved_k == saved
  for name in ("proposer", "coder"):
    leaves = jax.tree.leaves(state[name]["params"])
    leaves_k = jax.tree.leaves(state_k[name]["params"])
    assert len(leaves) == len(leaves_k)
    for a, b in zip(leaves, leaves_k):
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert json.load(open(killed / "phases.json"))[3]["status_counts"] == phases[3]["status_counts"]
  assert os.path.exists(killed / "eval" / "round_2" / "summary.json")

  # Another config in the same workdir is refused; more rounds resume.
  proc = subprocess.run(_command(killed, kernelbench) + ["--config.backend=cuda"], cwd=REPO,
                        capture_output=True, text=True, timeout=300)
  assert proc.returncode != 0 and "backend differ" in proc.stderr


def test_missing_inputs_are_config_errors_before_any_policy_is_built(tmp_path):
  from kernelzero_jax import coevolve  # pylint: disable=import-outside-toplevel
  broken = tmp_path / "broken_module.py"
  broken.write_text("class Model: pass\n")
  bad_seeds = CoevolveConfig(seed_modules=(str(broken),))
  with pytest.raises(configs.ConfigError, match="no usable seed module"):
    coevolve.run(bad_seeds, str(tmp_path / "a"))
  with pytest.raises(configs.ConfigError, match="seed_modules: .* does not exist"):
    coevolve.run(CoevolveConfig(seed_modules=(str(tmp_path / "nowhere"),)), str(tmp_path / "b"))
  with pytest.raises(configs.ConfigError, match="neither 'transformers'"):
    coevolve.run(CoevolveConfig(cooccurrence=str(tmp_path / "nowhere")), str(tmp_path / "c"))


def test_the_seed_pool_holds_the_examples_and_teacher_modules():
  from kernelzero_jax import coevolve  # pylint: disable=import-outside-toplevel
  sources = coevolve.seed_modules(CoevolveConfig(seed_teacher_modules=3))
  assert len(sources) == 5 and all("class Model" in s for s in sources)
  assert sources[2:] == coevolve.seed_modules(CoevolveConfig(seed_teacher_modules=3))[2:]
  short = coevolve.seed_modules(CoevolveConfig(seed_teacher_modules=3, seed_teacher_max_ops=1,
                                               seed_teacher_kinds=("reduction", "softmax")))
  from kernelzero_jax.teacher import generator  # pylint: disable=import-outside-toplevel
  assert short[2:] == [src for _, src, _ in generator.generate_modules(
      3, seed=1_000, kinds=("reduction", "softmax"), max_ops=1)]
  with pytest.raises(configs.ConfigError, match="at most 1 operations"):
    coevolve.seed_modules(CoevolveConfig(seed_teacher_modules=1, seed_teacher_max_ops=1,
                                         seed_teacher_kinds=("matmul",)))
  with pytest.raises(ValueError, match="seed_teacher_kinds"):
    CoevolveConfig(seed_teacher_kinds=("conv",))
  with pytest.raises(ValueError, match="seed_teacher_max_ops"):
    CoevolveConfig(seed_teacher_max_ops=-1)


def test_the_default_coder_is_the_shipped_warm_start():
  from experiments.configs import coevolve_tiny  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.policy import load_policy  # pylint: disable=import-outside-toplevel
  config = configs.from_mapping(CoevolveConfig, coevolve_tiny.get_config())
  model, tokenizer = load_policy(config.coder_policy)
  assert model.config.hidden_size == 128 and len(tokenizer) == 1028
  assert config.prompt_style == "compact" and config.seed_teacher_modules == 8
  assert config.seed_teacher_max_ops == 1 and "matmul" not in config.seed_teacher_kinds
