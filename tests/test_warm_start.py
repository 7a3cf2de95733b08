"""The warm start: comment-free teacher targets, the compact prompt, a tokenizer trained on pairs,
and the whole pipeline (data, tokenizer, SFT, held-out eval, CA-GRPO, eval, plot) at toy size."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import io
import json
import os
import subprocess
import sys
import tokenize

import pytest

from kernelzero_jax import configs
from kernelzero_jax.assets import make_tiny_tokenizer
from kernelzero_jax.coder import prompts
from kernelzero_jax.teacher import generator
from kernelzero_jax.teacher.teach import strip_comments, write
from kernelzero_jax.tokenizer import load_tokenizer
from kernelzero_jax import warm_start

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("backend", ["triton", "cuda"])
def test_strip_comments_keeps_the_code_and_drops_every_comment(backend):
  for _, _, spec in generator.generate_modules(40, seed=3, split="train"):
    full, bare = write(spec, backend), write(spec, backend, comments=False)
    assert ast.dump(ast.parse(full)) == ast.dump(ast.parse(bare))
    kinds = [t.type for t in tokenize.generate_tokens(io.StringIO(bare).readline)]
    assert tokenize.COMMENT not in kinds and tokenize.COMMENT in [
        t.type for t in tokenize.generate_tokens(io.StringIO(full).readline)]
    assert len(bare) < len(full)
    if backend == "cuda":  # '#' and '//' inside the CUDA source string stay
      assert "#include <torch/extension.h>" in bare


def test_strip_comments_cuts_trailing_comments_and_keeps_hashes_in_strings():
  source = 'x = 1  # one\n# a line\ns = "#not a comment"  # two\n    # indented\ny = 2\n'
  assert strip_comments(source) == 'x = 1\ns = "#not a comment"\ny = 2\n'


def test_compact_prompt_holds_the_task_without_rules_or_example():
  source = generator.generate_modules(1, seed=0)[0][1]
  compact = prompts.coder_messages(source, "triton", "compact")
  zero = prompts.coder_messages(source, "triton", "zero_shot")
  assert compact[0] == zero[0]  # same system message
  assert f"```python\n{source}" in compact[1]["content"]
  assert "ModelNew" in compact[1]["content"] and "Triton kernels" in compact[1]["content"]
  assert "Rules:" not in compact[1]["content"] and "Rules:" in zero[1]["content"]
  assert len(compact[1]["content"]) < len(zero[1]["content"]) - 500
  with pytest.raises(ValueError, match="unknown prompt style"):
    prompts.coder_messages(source, "triton", "few_shot")


def test_tokenizer_trained_on_texts_is_capped_and_round_trips(tmp_path):
  texts = [write(spec, "triton") for _, _, spec in generator.generate_modules(20, seed=1)]
  size = make_tiny_tokenizer.write(str(tmp_path / "tok"), texts, 600, exact_size=False)
  tokenizer = load_tokenizer(str(tmp_path / "tok"))
  assert size == len(tokenizer) <= 600
  ids = tokenizer(texts[0])["input_ids"]
  assert tokenizer.decode(ids) == texts[0]
  bundled = load_tokenizer()
  assert len(ids) < len(bundled(texts[0])["input_ids"])  # trained on this kind of text
  with pytest.raises(RuntimeError, match="wanted 100000"):
    make_tiny_tokenizer.write(str(tmp_path / "tok2"), texts, 100000)


def test_warm_start_config_rejects_bad_input():
  with pytest.raises(ValueError, match="prompt_style"):
    warm_start.WarmStartConfig(prompt_style="chatty")
  with pytest.raises(ValueError, match="model_dir"):
    configs.from_mapping(warm_start.WarmStartConfig, {"policy": {"model_dir": "/x"}})
  with pytest.raises(ValueError, match="probe_rl_modules"):
    warm_start.WarmStartConfig(num_rl_modules=4, probe_rl_modules=5)
  with pytest.raises(ValueError, match="num_unseen_modules"):
    warm_start.WarmStartConfig(num_unseen_modules=-1)
  with pytest.raises(ValueError, match="stop_after"):
    warm_start.WarmStartConfig(stop_after="eval")
  for stage, needs in (("probe_sft", "probe_rl_modules"), ("unseen_rl", "num_unseen_modules")):
    with pytest.raises(ValueError, match="does not run"):
      warm_start.WarmStartConfig(stop_after=stage)
    warm_start.WarmStartConfig(stop_after=stage, num_rl_modules=4, **{needs: 1})
  with pytest.raises(ValueError, match="does not run"):
    configs.from_mapping(warm_start.WarmStartConfig,
                         {"stop_after": "eval_rl", "learner": {"num_steps": 0}})
  warm_start.WarmStartConfig(stop_after="eval_sft")


@pytest.mark.parametrize("name,train_modules", [("warm_start_gpu", None),
                                                  ("warm_start_gpu_rl", None),
                                                  ("warm_start_gpu_6k", 6000)])
def test_gpu_configs_resolve_and_can_reuse_the_tiny_recipes_data(name, train_modules):
  """The GPU recipes run with --config.data_from=<a warm_start_tiny_long.py run's workdir> (made
  with --config.num_train_modules=N where the recipe needs N): their other data fields must stay
  that config's, or reuse_data refuses the data (and the GPU run would remake it)."""
  tiny = importlib.import_module("experiments.configs.warm_start_tiny_long").get_config()
  if train_modules is not None:
    tiny.num_train_modules = train_modules
  gpu = importlib.import_module(f"experiments.configs.{name}")
  tiny_config = configs.from_mapping(warm_start.WarmStartConfig, tiny)
  config = configs.from_mapping(warm_start.WarmStartConfig, gpu.get_config())
  assert config.policy.preset == "coder-small"
  assert {k: getattr(config, k) for k in warm_start.DATA_FIELDS} == {
      k: getattr(tiny_config, k) for k in warm_start.DATA_FIELDS}
  learner = config.learner
  assert learner.optimizer.total_steps >= (learner.num_steps * learner.updates_per_batch
                                           * learner.epochs_per_batch)


def test_max_ops_bounds_every_draw_of_the_warm_start(tmp_path):
  """Train, held-out, RL and unseen modules all keep to max_ops; None keeps the usual draw."""
  with pytest.raises(ValueError, match="max_ops"):
    warm_start.WarmStartConfig(max_ops=0)
  config = warm_start.WarmStartConfig(max_ops=2, num_train_modules=40, num_rl_modules=20,
                                      num_unseen_modules=12)
  for split, seed in (("train", 0), ("heldout", 1), ("train", 2)):
    drawn = warm_start.draw_modules(config, 40, seed, split)
    assert len(drawn) == 40 and {spec.split() for _, _, spec in drawn} == {split}
    assert max(generator.num_ops(spec) for _, _, spec in drawn) == 2
    assert {spec.kind for _, _, spec in drawn} == set(generator.family.KINDS)
  unbounded = warm_start.draw_modules(warm_start.WarmStartConfig(), 30, 0)
  assert [m[1] for m in unbounded] == [m[1] for m in generator.generate_modules(30, 0)]
  assert max(generator.num_ops(spec) for _, _, spec in unbounded) > 2
  level = os.path.join(warm_start.write_unseen_problems(config, str(tmp_path)), "level1")
  short = {source for _, source, _ in generator.generate_modules(200, 3, split="train",
                                                                 max_ops=2)}
  unseen = [open(os.path.join(level, f)).read() for f in os.listdir(level)]
  assert len(unseen) == 12 and set(unseen) <= short


def test_data_from_refuses_data_of_another_operation_bound(tmp_path):
  source = tmp_path / "source"
  source.mkdir()
  (source / "config.json").write_text(json.dumps(dataclasses.asdict(
      warm_start.WarmStartConfig(max_ops=2))))
  (source / "summary.json").write_text(json.dumps({"data": {}, "tokenizer": {}}))
  with pytest.raises(configs.ConfigError, match="max_ops"):
    warm_start.reuse_data(warm_start.WarmStartConfig(data_from=str(source)), str(tmp_path))


def test_unseen_modules_have_trained_op_structures_and_were_never_trained_on(tmp_path,
                                                                            monkeypatch):
  real = generator.generate_modules

  def drawing_trained_ones_too(n, seed, **kwargs):
    """Seed 3's draw starts with two train modules (seed 0), which the unseen set must skip."""
    if seed != 3:
      return real(n, seed, **kwargs)
    return (real(2, 0, **kwargs) + real(n, 3, **kwargs))[:n]

  monkeypatch.setattr(generator, "generate_modules", drawing_trained_ones_too)
  config = warm_start.WarmStartConfig(num_train_modules=40, num_rl_modules=20,
                                      num_unseen_modules=30)
  level = os.path.join(warm_start.write_unseen_problems(config, str(tmp_path)), "level1")
  read = lambda i: open(os.path.join(level, next(f for f in os.listdir(level)
                                                 if f.startswith(f"{i}_")))).read()
  assert len(os.listdir(level)) == 30
  unseen = [read(i) for i in range(1, 31)]
  assert len(set(unseen)) == 30
  trained = {source for _, source, _ in real(40, 0, split="train")}
  trained |= {source for _, source, _ in real(20, 2, split="train")}
  assert not set(unseen) & trained
  assert unseen[:28] == [source for _, source, _ in real(28, 3, split="train")]
  # Another number draws again (the same first modules); the same number keeps what is there.
  warm_start.write_unseen_problems(dataclasses.replace(config, num_unseen_modules=5),
                                   str(tmp_path))
  assert len(os.listdir(level)) == 5 and [read(i) for i in range(1, 6)] == unseen[:5]


def _toy_config(**overrides):
  cfg = dict(
      num_train_modules=3, num_heldout_modules=3, num_rl_modules=2, vocab_size=1024,
      policy=dict(preset="tiny"),
      sft=dict(num_steps=3, batch_size=2, seq_len=1024, compute_dtype="float32", eval_every=3,
               checkpoint_every=3, optimizer=dict(learning_rate=1e-3, warmup_steps=1,
                                                  total_steps=3)),
      eval_max_new_tokens=8,
      learner=dict(num_steps=1, rollout=dict(prompts_per_step=2, group_size=2, max_new_tokens=8),
                   optimizer=dict(learning_rate=1e-5, warmup_steps=1, total_steps=1),
                   compute_dtype="float32", sample_dtype="float32"),
      sandbox=dict(device="cpu", timing=False, num_correct_trials=1), max_parallel=2)
  cfg.update(overrides)
  return configs.from_mapping(warm_start.WarmStartConfig, cfg)


def test_warm_start_runs_every_stage_and_resumes(tmp_path):
  workdir = str(tmp_path / "ws")
  config = _toy_config(probe_rl_modules=1, num_unseen_modules=1)
  summary = warm_start.run(config, workdir, progress=False)
  data = summary["data"]
  assert data["train"]["num_pairs"] == 3 and data["heldout"]["num_pairs"] == 3
  problems = os.listdir(os.path.join(workdir, "data", "heldout_problems", "level1"))
  assert len(problems) == data["heldout"]["num_problems"] >= 1
  assert len(os.listdir(os.path.join(workdir, "data", "rl_modules"))) == 2
  with open(os.path.join(workdir, "data", "train.jsonl")) as f:
    pair = json.loads(f.readline())
  assert "Rules:" not in pair["messages"][1]["content"]  # compact prompts
  assert "#" not in pair["completion"]                    # no comments in the targets
  assert 256 < summary["tokenizer"]["vocab_size"] <= 1024
  assert summary["sft"]["heldout_loss"] > 0
  # The probe: the first RL module (by name), as a KernelBench problem.
  first = sorted(os.listdir(os.path.join(workdir, "data", "rl_modules")))[0]
  assert os.listdir(os.path.join(workdir, "probe_problems", "level1")) == [f"1_{first}"]
  assert len(os.listdir(os.path.join(workdir, "data", "unseen_problems", "level1"))) == 1
  for key in ("probe_sft", "probe_rl", "unseen_sft", "unseen_rl"):
    assert summary[key]["num_problems"] == summary[key]["num_samples"] == 1
    assert summary[key]["status_counts"]["format_error"] == 1
  for key in ("eval_sft", "eval_rl"):
    # 8 new tokens cannot hold a kernel: every held-out sample is a format error, judged as such.
    assert summary[key]["num_samples"] == data["heldout"]["num_problems"]
    assert summary[key]["pass_rate"] == 0.0
    counts = {k: v for k, v in summary[key]["status_counts"].items() if v}
    assert counts == {"format_error": summary[key]["num_samples"]}
  for key in ("eval_sft", "probe_sft", "unseen_sft"):  # every sample counted under its kind
    by_kind = summary[key]["by_kind"]
    assert set(by_kind) <= set(generator.family.KINDS) and by_kind
    assert sum(k["total"] for k in by_kind.values()) == summary[key]["num_samples"]
    assert sum(k["correct"] for k in by_kind.values()) == summary[key]["num_correct"]
  for prefix in ("eval", "probe", "unseen"):  # after RL: compared problem by problem with SFT
    vs_sft = summary[f"{prefix}_rl"][f"vs_{prefix}_sft"]
    assert vs_sft["problems"] == summary[f"{prefix}_sft"]["num_problems"]
    assert vs_sft["correct_before"] == summary[f"{prefix}_sft"]["num_correct"]
    assert vs_sft["correct_after"] == summary[f"{prefix}_rl"]["num_correct"]
    assert vs_sft["samples_after"] == summary[f"{prefix}_rl"]["num_samples"]
    assert vs_sft["same"] == vs_sft["problems"] and vs_sft["sign_test_p"] == 1.0
    assert set(vs_sft["by_group"]) == set(summary[f"{prefix}_rl"]["by_kind"])
  assert summary["rl"]["accuracy"] == 0.0
  assert os.path.getsize(summary["plot"]) > 10_000
  with open(os.path.join(workdir, "summary.json")) as f:
    assert json.load(f)["eval_rl"] == summary["eval_rl"]

  # A rerun does nothing again; more RL steps resume the RL stage and redo its evaluation only
  # (with more micro-batches: memory, not the experiment).
  assert warm_start.run(config, workdir, progress=False)["wall_s"] == summary["wall_s"]
  longer = _toy_config(probe_rl_modules=1, num_unseen_modules=1, learner=dict(
      num_steps=2, num_micro_batches=2,
      rollout=dict(prompts_per_step=2, group_size=2, max_new_tokens=8),
      optimizer=dict(learning_rate=1e-5, warmup_steps=1, total_steps=1),
      compute_dtype="float32", sample_dtype="float32"))
  resumed = warm_start.run(longer, workdir, progress=False)
  assert resumed["rl"]["num_steps"] == 2 and resumed["eval_rl"] == summary["eval_rl"]
  assert resumed["probe_rl"] == summary["probe_rl"] and "probe_rl" in resumed["wall_s"]
  assert resumed["unseen_rl"] == summary["unseen_rl"] and "unseen_rl" in resumed["wall_s"]
  for key in ("data", "tokenizer", "sft", "eval_sft", "unseen_sft"):
    assert resumed["wall_s"][key] == summary["wall_s"][key]
  with open(os.path.join(workdir, "rl", "metrics.jsonl")) as f:
    assert [json.loads(line)["step"] for line in f] == [1, 2]
  # A different experiment in the same workdir is refused.
  with pytest.raises(configs.ConfigError):
    warm_start.run(_toy_config(num_train_modules=4), workdir, progress=False)

  # Another policy on the same data: data/ and tokenizer/ are copied, not made again; more RL
  # modules are drawn, the source's first ones among them.
  other = str(tmp_path / "other")
  reused = warm_start.run(
      _toy_config(data_from=workdir, policy=dict(preset="tiny", init_seed=1), num_rl_modules=5,
                  learner=dict(num_steps=0)), other, progress=False)
  assert reused["data"] == summary["data"] and reused["tokenizer"] == summary["tokenizer"]
  assert "rl" not in reused and reused["wall_s"]["data"] < 5
  with open(os.path.join(other, "data", "heldout.jsonl")) as a, \
      open(os.path.join(workdir, "data", "heldout.jsonl")) as b:
    assert a.read() == b.read()
  rl_source, rl_more = (sorted(os.listdir(os.path.join(w, "data", "rl_modules")))
                        for w in (workdir, other))
  assert len(rl_more) == 5 and rl_more[:2] == rl_source
  for name in rl_source:
    with open(os.path.join(other, "data", "rl_modules", name)) as a, \
        open(os.path.join(workdir, "data", "rl_modules", name)) as b:
      assert a.read() == b.read()
  with pytest.raises(configs.ConfigError, match="other data fields"):
    warm_start.run(_toy_config(data_from=workdir, seed=1), str(tmp_path / "third"),
                   progress=False)


def test_stop_after_ends_the_run_after_that_stage_and_a_later_run_goes_on(tmp_path):
  workdir = str(tmp_path / "ws")
  made = warm_start.run(_toy_config(stop_after="tokenizer"), workdir, progress=False)
  assert set(made) == {"wall_s", "data", "tokenizer"} and set(made["wall_s"]) == {"data",
                                                                                 "tokenizer"}
  assert sorted(os.listdir(workdir)) == ["config.json", "data", "summary.json", "tokenizer"]
  # The same workdir, one stage further: SFT runs, the data is not made again.
  went_on = warm_start.run(_toy_config(stop_after="sft"), workdir, progress=False)
  assert set(went_on) == {"wall_s", "data", "tokenizer", "sft"}
  assert went_on["wall_s"]["data"] == made["wall_s"]["data"]
  assert not os.path.exists(os.path.join(workdir, "eval_sft"))


def test_warm_start_refuses_a_vocabulary_larger_than_the_model(tmp_path):
  config = _toy_config(vocab_size=4096, num_train_modules=1, num_heldout_modules=1,
                       num_rl_modules=0)
  with pytest.raises(configs.ConfigError, match="exceeds the vocabulary"):
    warm_start.run(config, str(tmp_path / "ws"), progress=False)


def test_warm_start_cli_runs_the_tiny_config_overridden_to_toy_size(tmp_path):
  workdir = tmp_path / "ws"
  args = [sys.executable, "-m", "experiments.warm_start",
          "--config=experiments/configs/warm_start_tiny.py", f"--workdir={workdir}",
          "--config.num_train_modules=2", "--config.num_heldout_modules=2",
          "--config.num_rl_modules=0", "--config.num_unseen_modules=0",
          "--config.sft.num_steps=1", "--config.sft.checkpoint_every=1",
          "--config.eval_max_new_tokens=4", "--config.learner.num_steps=0"]
  proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  summary = json.loads(proc.stdout[proc.stdout.index("{"):])
  counts = {k: v for k, v in summary["eval_sft"]["status_counts"].items() if v}
  assert counts == {"format_error": summary["data"]["heldout"]["num_problems"]}
  assert "rl" not in summary and (workdir / "warm_start.png").exists()
