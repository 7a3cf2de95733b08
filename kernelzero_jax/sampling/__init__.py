"""JAX sampler: jitted prefill + `while_loop` decode over a KV cache, with temperature, top-k,
top-p, stop tokens, group sampling and per-token log-probabilities."""

from kernelzero_jax.sampling.sampler import (FINISH_LENGTH, FINISH_STOP, SampleOutput, Sampler,
                                             key_from_seed, next_power_of_two, sample_logits)

__all__ = ["FINISH_LENGTH", "FINISH_STOP", "SampleOutput", "Sampler", "key_from_seed",
           "next_power_of_two", "sample_logits"]
