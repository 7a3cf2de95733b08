r"""Exports a trained policy (an Orbax run directory) as a Hugging Face checkpoint directory.

    python -m experiments.export_policy --run=/tmp/ws_tiny/sft --preset=coder-tiny \
        --tokenizer_dir=/tmp/ws_tiny/tokenizer --out=/tmp/coder_tiny_hf [--dtype=bfloat16]

The architecture comes from --preset (or --model_dir, the checkpoint the run started from); the
parameters from the run's latest checkpoint. The result (config.json, model.safetensors and the
tokenizer) loads with `--config.policy.model_dir=OUT` here and with transformers'
Qwen2ForCausalLM.from_pretrained.
"""

from absl import app
from absl import flags

from kernelzero_jax.model.export import save_hf_checkpoint
from kernelzero_jax.policy import PolicyConfig, load_policy

_RUN = flags.DEFINE_string("run", None, "The run directory (train_sft, train_coder, ...).")
_PRESET = flags.DEFINE_string("preset", "tiny", "Architecture preset (without --model_dir).")
_MODEL_DIR = flags.DEFINE_string("model_dir", None, "Or: the HF checkpoint the run started from.")
_TOKENIZER = flags.DEFINE_string("tokenizer_dir", None, "Tokenizer (default: the model's).")
_OUT = flags.DEFINE_string("out", None, "Output directory.")
_DTYPE = flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"], "Saved dtype.")
flags.mark_flags_as_required(["run", "out"])


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  model, tokenizer = load_policy(PolicyConfig(model_dir=_MODEL_DIR.value, preset=_PRESET.value,
                                              tokenizer_dir=_TOKENIZER.value,
                                              init_from=_RUN.value))
  print(save_hf_checkpoint(model, _OUT.value, _DTYPE.value, tokenizer))


if __name__ == "__main__":
  app.run(main)
