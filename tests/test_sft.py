"""SFT: the loss and its masking, packing, a short run whose held-out loss falls, resume, CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from kernelzero_jax.metrics import read_metrics
from kernelzero_jax.model.config import PRESETS
from kernelzero_jax.model.qwen2 import Qwen2, causal_padding_mask, positions_from_valid
from kernelzero_jax.rl import train_step as ts
from kernelzero_jax.sft import data as sft_data
from kernelzero_jax.sft import trainer as sft_trainer
from kernelzero_jax.tokenizer import load_tokenizer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORDS = ("alpha beta gamma delta kernel block grid warp tile thread load store mask sum max "
         "relu gelu exp row col").split()


def _model(seed=0):
  return Qwen2(PRESETS["tiny"], rngs=nnx.Rngs(seed))


def _log_softmax_np(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_cross_entropy_matches_numpy_and_ignores_prompt_tokens():
  model = _model()
  rng = np.random.default_rng(0)
  tokens = rng.integers(1, 1024, size=(2, 9)).astype(np.int32)
  mask = np.zeros((2, 9), np.float32)
  mask[0, 4:9] = 1
  mask[1, 6:8] = 1
  valid = np.ones((2, 9), bool)
  logits = np.asarray(model(jnp.asarray(tokens), positions_from_valid(valid),
                            causal_padding_mask(valid))[0])
  lp = _log_softmax_np(logits.astype(np.float64))
  nll = [-lp[b, t - 1, tokens[b, t]] for b in range(2) for t in range(1, 9) if mask[b, t]]
  expected = float(np.mean(nll))

  objective = sft_trainer.cross_entropy_objective()
  batch = dict(tokens_BxT=tokens, valid_BxT=valid, completion_mask_BxT=mask)
  logp, ent = ts.sequence_logprobs(model, jnp.asarray(tokens), jnp.asarray(valid))
  loss, sums = objective.loss(logp, ent, batch, objective.normalizer(batch))
  assert float(loss) == pytest.approx(expected, rel=1e-5)
  assert float(sums["nll"]) == pytest.approx(expected * mask.sum(), rel=1e-5)
  # The loss does not depend on the logprobs of prompt tokens.
  logp_changed = jnp.where(jnp.asarray(mask) > 0, logp, logp - 5.0)
  assert float(objective.loss(logp_changed, ent, batch, objective.normalizer(batch))[0]) == \
      pytest.approx(float(loss), rel=1e-6)


def test_pack_layout_and_drops():
  rows = sft_data.pack([([1, 2], [3, 4]), ([5], [6]), ([7, 8, 9], [10, 11, 12]), ([1] * 9, [2])],
                       seq_len=8, pad_id=0)
  assert rows.num_examples == 3 and rows.num_dropped == 1  # 10 tokens > 8: dropped, not cut
  np.testing.assert_array_equal(rows.tokens, [[1, 2, 3, 4, 5, 6, 0, 0],
                                              [7, 8, 9, 10, 11, 12, 0, 0]])
  np.testing.assert_array_equal(rows.segment_ids, [[1, 1, 1, 1, 2, 2, 0, 0],
                                                   [1, 1, 1, 1, 1, 1, 0, 0]])
  np.testing.assert_array_equal(rows.loss_mask, [[0, 0, 1, 1, 0, 1, 0, 0],
                                                 [0, 0, 0, 1, 1, 1, 0, 0]])


def test_packed_logprobs_equal_unpacked():
  """Examples packed into one row score exactly as when each runs alone."""
  model = _model()
  examples = [([11, 12, 13], [14, 15]), ([21, 22], [23, 24, 25, 26]), ([31], [32])]
  rows = sft_data.pack(examples, seq_len=16)
  assert len(rows) == 1
  batch = rows.batch([0])
  packed, _ = ts.sequence_logprobs(model, jnp.asarray(batch["tokens_BxT"]),
                                   jnp.asarray(batch["valid_BxT"]),
                                   segment_ids_BxT=jnp.asarray(batch["segment_ids_BxT"]))
  t = 0
  for prompt, completion in examples:
    alone = np.array([prompt + completion], np.int32)
    ref, _ = ts.sequence_logprobs(model, jnp.asarray(alone), jnp.ones(alone.shape, bool))
    n = alone.shape[1]
    # Position 0 of an example has no context of its own: compare from its second token.
    np.testing.assert_allclose(np.asarray(packed)[0, t + 1:t + n], np.asarray(ref)[0, 1:],
                               rtol=1e-5, atol=1e-6)
    t += n


def test_read_pairs_names_bad_lines(tmp_path):
  path = tmp_path / "pairs.jsonl"
  path.write_text('{"prompt": "a", "completion": "b"}\n\n{"completion": "c"}\n')
  with pytest.raises(sft_data.DataError, match=r"pairs.jsonl:3: give exactly one of"):
    sft_data.read_pairs(str(path))
  path.write_text('{"prompt": "a", "completion": "b"}\nnot json\n')
  with pytest.raises(sft_data.DataError, match=r":2: not JSON"):
    sft_data.read_pairs(str(path))
  with pytest.raises(sft_data.DataError, match="cannot read"):
    sft_data.read_pairs(str(tmp_path / "missing.jsonl"))


def _pairs(n, seed):
  """Copy tasks: the completion repeats the prompt's words in reverse (learnable, not trivial)."""
  rng = np.random.default_rng(seed)
  out = []
  for _ in range(n):
    words = list(rng.choice(WORDS, size=int(rng.integers(3, 6))))
    out.append({"prompt": "reverse: " + " ".join(words) + "\n",
                "completion": " ".join(reversed(words))})
  return out


def _rows(tokenizer, n, seed, seq_len=128):
  return sft_data.pack([sft_data.encode_pair(tokenizer, p) for p in _pairs(n, seed)], seq_len,
                       tokenizer.pad_token_id or 0)


def _config(lr, steps, **kw):
  return sft_trainer.SFTConfig(
      seed=0, num_steps=steps, batch_size=4, seq_len=128, num_micro_batches=2,
      optimizer=ts.OptimizerConfig(learning_rate=lr, schedule="constant", total_steps=steps),
      compute_dtype="float32", eval_every=steps, checkpoint_every=2, **kw)


@pytest.fixture(scope="module")
def tokenizer():
  return load_tokenizer()


def test_heldout_loss_falls_and_not_at_zero_lr(tokenizer, tmp_path):
  train, heldout = _rows(tokenizer, 64, 0), _rows(tokenizer, 16, 1)
  losses = {}
  for lr in (3e-3, 0.0):
    trainer = sft_trainer.SFTTrainer(_config(lr, 12), _model(), train, heldout, progress=False)
    before = trainer.heldout_loss()
    trainer.run(str(tmp_path / f"lr{lr}"))
    losses[lr] = (before, trainer.heldout_loss())
  before, after = losses[3e-3]
  assert after < 0.7 * before, losses
  frozen_before, frozen_after = losses[0.0]
  assert frozen_after == pytest.approx(frozen_before, rel=1e-6)


def test_resumed_sft_matches_uninterrupted(tokenizer, tmp_path):
  train = _rows(tokenizer, 24, 0)
  sft_trainer.SFTTrainer(_config(1e-3, 4), _model(), train, progress=False).run(
      str(tmp_path / "whole"))
  sft_trainer.SFTTrainer(_config(1e-3, 2), _model(), train, progress=False).run(
      str(tmp_path / "split"))
  sft_trainer.SFTTrainer(_config(1e-3, 4), _model(), train, progress=False).run(
      str(tmp_path / "split"))
  a = read_metrics(str(tmp_path / "whole" / "metrics.jsonl"))
  b = read_metrics(str(tmp_path / "split" / "metrics.jsonl"))
  assert [r["step"] for r in b] == [1, 2, 3, 4]
  for ra, rb in zip(a, b):
    assert ra["loss"] == pytest.approx(rb["loss"], rel=1e-6), ra["step"]


def test_epoch_rows_visit_every_row_once_per_epoch():
  rows = np.concatenate([sft_trainer.epoch_rows(10, 4, 0, s) for s in range(1, 6)])  # 2 epochs
  assert sorted(rows[:10]) == list(range(10)) and sorted(rows[10:20]) == list(range(10))


def test_train_sft_command_and_warm_start_for_train_coder(tmp_path, monkeypatch):
  for name, seed, n in (("train", 0, 24), ("heldout", 1, 6)):
    with open(tmp_path / f"{name}.jsonl", "w") as f:
      f.writelines(json.dumps(p) + "\n" for p in _pairs(n, seed))
  workdir = tmp_path / "sft"
  cmd = [sys.executable, "-m", "experiments.train_sft",
         "--config=experiments/configs/sft_tiny_triton.py", f"--workdir={workdir}",
         f"--config.train_data={tmp_path / 'train.jsonl'}",
         f"--config.heldout_data={tmp_path / 'heldout.jsonl'}",
         "--config.sft.num_steps=2", "--config.sft.seq_len=128", "--config.sft.batch_size=2",
         "--config.sft.eval_every=2"]
  proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  records = read_metrics(str(workdir / "metrics.jsonl"))
  assert [r["step"] for r in records] == [0, 1, 2]
  assert "heldout_loss" in records[0] and "heldout_loss" in records[-1]
  # The SFT checkpoint is a starting point for another stage.
  from kernelzero_jax.policy import PolicyConfig, load_policy  # pylint: disable=import-outside-toplevel
  warm, _ = load_policy(PolicyConfig(init_from=str(workdir)))
  cold, _ = load_policy(PolicyConfig())
  assert float(jnp.abs(warm.embed_VxD[...] - cold.embed_VxD[...]).max()) > 0
  # A workdir relative to the cwd (as typed on a command line) loads the same parameters.
  monkeypatch.chdir(tmp_path)
  relative, _ = load_policy(PolicyConfig(init_from="sft"))
  assert float(jnp.abs(relative.embed_VxD[...] - warm.embed_VxD[...]).max()) == 0
