r"""SFT of the tiny policy on (prompt, completion) pairs: the shape of the Coder's warm start.

    python -m experiments.train_sft --config=experiments/configs/sft_tiny_triton.py \
        --workdir=/tmp/sft_tiny --config.train_data=TRAIN.jsonl --config.heldout_data=HELD.jsonl

The tiny preset (PRESETS["tiny"]) at random weights with the bundled tokenizer, packed rows of
2048 tokens, AdamW with warm-up, fp32 on a CPU. The held-out loss is logged at step 0 and every
eval_every steps in workdir/metrics.jsonl. A later stage starts from the result with
--config.policy.init_from=/tmp/sft_tiny.
"""

from kernelzero_jax import configs
from kernelzero_jax.sft.run import SFTRunConfig


def get_config():
  return configs.config_dict(
      SFTRunConfig,
      sft=dict(num_steps=200, batch_size=8, seq_len=2048, num_micro_batches=2,
               compute_dtype="float32", eval_every=25, checkpoint_every=25,
               optimizer=dict(learning_rate=1e-3, warmup_steps=20, total_steps=200,
                              schedule="cosine", weight_decay=0.01)))
