"""The Coder's RL environment (real sandbox subprocesses) and the train_coder experiment."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from kernelzero_jax import coder
from kernelzero_jax import configs
from kernelzero_jax.coder import train
from kernelzero_jax.coder.environment import DEFAULT_MODULES, CoderEnvironment, load_modules
from kernelzero_jax.rl.learner import Completion
from kernelzero_jax.sandbox import SandboxConfig
from kernelzero_jax.tasks.kernelbench import TaskError, load_reference_file
from kernelzero_jax.tokenizer import TINY_TOKENIZER_DIR, load_tokenizer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CPU_SANDBOX = SandboxConfig(device="cpu", timing=False, num_correct_trials=2)
_, TRITON_ADD = coder.example_sources("triton")


def _env(**kw) -> CoderEnvironment:
  modules = [load_reference_file(DEFAULT_MODULES[0])]  # the `a + b` module
  return CoderEnvironment(modules, load_tokenizer(), "triton", CPU_SANDBOX, max_parallel=2, **kw)


def test_prompts_render_the_module_and_are_deterministic():
  env = _env()
  a = env.make_prompts(1, 3, np.random.default_rng([0, 1]))
  b = env.make_prompts(1, 3, np.random.default_rng([0, 1]))
  assert a == b and len(a) == 3  # more prompts than modules: drawn with replacement
  text = env.tokenizer.decode(list(a[0].token_ids))
  assert env.modules[0].source.strip() in text
  assert a[0].payload == env.modules[0].source


def test_score_judges_distinct_candidates_once(monkeypatch):
  env = _env()
  prompt = env.make_prompts(1, 1, np.random.default_rng(0))[0]
  good = f"Here it is.\n```python\n{TRITON_ADD}```<|im_end|>"
  wrong = good.replace("a + b, mask=mask", "a - b, mask=mask")
  assert wrong != good
  completions = [Completion(0, t, (), "stop") for t in
                 (good, "no code at all", good, wrong, f"```python\n{TRITON_ADD}")]
  jobs_seen = []
  evaluate = env.sandbox.evaluate

  def counting_evaluate(jobs, **kw):
    jobs = list(jobs)
    jobs_seen.append(len(jobs))
    return evaluate(jobs, **kw)

  monkeypatch.setattr(env.sandbox, "evaluate", counting_evaluate)
  results = env.score(1, [prompt], completions)
  assert [r["status"] for r in results] == ["correct", "format_error", "correct", "incorrect",
                                            "format_error"]
  assert [r["correct"] for r in results] == [True, False, True, False, False]
  assert jobs_seen == [2]  # the duplicate of `good` was judged once
  assert "ModelNew" in results[1]["reasons"][0]
  assert "never closed" in results[4]["reasons"][0]


def test_environment_refuses_what_it_cannot_judge():
  modules = [load_reference_file(DEFAULT_MODULES[0])]
  with pytest.raises(ValueError, match="need sandbox.device 'cuda'"):
    CoderEnvironment(modules, load_tokenizer(), "cuda", CPU_SANDBOX)
  with pytest.raises(ValueError, match="unknown backend"):
    CoderEnvironment(modules, load_tokenizer(), "opencl", CPU_SANDBOX)
  with pytest.raises(ValueError, match="at least one"):
    CoderEnvironment([], load_tokenizer(), "triton", CPU_SANDBOX)


def test_load_modules_skips_broken_files_and_names_them(tmp_path):
  (tmp_path / "good.py").write_text(open(DEFAULT_MODULES[0]).read())
  (tmp_path / "broken.py").write_text("class Model(:\n")
  (tmp_path / "no_inputs.py").write_text("import torch\nclass Model(torch.nn.Module):\n  pass\n")
  tasks, problems = load_modules([str(tmp_path)])
  assert [t.name for t in tasks] == ["good"]
  assert len(problems) == 2 and any("broken.py" in p for p in problems)
  with pytest.raises(TaskError, match="does not exist"):
    load_modules([str(tmp_path / "missing")])


def test_config_files_resolve_and_reject_unknown_fields():
  for name in ("coder_tiny_triton", "coder_qwen7b_cuda"):
    module = importlib.import_module(f"experiments.configs.{name}")
    config = configs.from_mapping(train.CoderRunConfig, module.get_config())
    assert config.learner.rollout.group_size >= 1
  bad = configs.config_dict(train.CoderRunConfig)
  bad.learner.rollout.unlock()
  bad.learner.rollout.group_sise = 4
  with pytest.raises(configs.ConfigError, match=r"config.learner.rollout: unknown field\(s\) "
                                                r"\['group_sise'\]"):
    configs.from_mapping(train.CoderRunConfig, bad)


def _train_coder(workdir, *overrides):
  cmd = [sys.executable, "-m", "experiments.train_coder",
         "--config=experiments/configs/coder_tiny_triton.py", f"--workdir={workdir}",
         "--config.prompt_style=zero_shot", "--config.learner.num_steps=1",
         "--config.learner.rollout.prompts_per_step=1", "--config.learner.rollout.group_size=2",
         "--config.learner.rollout.max_new_tokens=8",
         # A None-default (placeholder) field set from the command line:
         f"--config.policy.tokenizer_dir={TINY_TOKENIZER_DIR}", *overrides]
  return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)


def test_train_coder_runs_resumes_and_guards_its_workdir(tmp_path):
  workdir = tmp_path / "run"
  proc = _train_coder(workdir)
  assert proc.returncode == 0, proc.stderr[-3000:]
  records = [json.loads(line) for line in open(workdir / "metrics.jsonl")]
  assert [r["step"] for r in records] == [1]
  assert records[0]["count_by_status/format_error"] == 2  # a random policy writes no kernel
  assert os.path.exists(workdir / "samples" / "step_000001.jsonl")
  assert os.listdir(workdir / "checkpoints") == ["1"]
  saved = json.load(open(workdir / "config.json"))
  assert saved["learner"]["rollout"]["group_size"] == 2 and saved["prompt_style"] == "zero_shot"
  assert saved["learner"]["rollout"]["temperature"] == 1.0  # untouched fields keep defaults
  assert saved["policy"]["tokenizer_dir"] == TINY_TOKENIZER_DIR

  # Training longer resumes from step 1.
  proc = _train_coder(workdir, "--config.learner.num_steps=2")
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert [json.loads(line)["step"] for line in open(workdir / "metrics.jsonl")] == [1, 2]

  # Any other change is refused, naming the field.
  proc = _train_coder(workdir, "--config.learner.rollout.temperature=0.5")
  assert proc.returncode != 0
  assert "learner.rollout.temperature differ" in proc.stderr

  proc = _train_coder(tmp_path / "other", "--config.learner.rollout.tempreature=0.5")
  assert proc.returncode != 0 and "tempreature" in proc.stderr
