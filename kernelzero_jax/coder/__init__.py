"""The Coder's side of the text: the prompt that asks for a `ModelNew` of a reference module (CUDA
or Triton), and the extraction of the candidate source from a sampled completion."""

from kernelzero_jax.coder.extract import Extraction, extract_code
from kernelzero_jax.coder.prompts import (BACKENDS, coder_messages, encode_prompt,
                                          example_sources, render_prompt)

__all__ = ["BACKENDS", "Extraction", "coder_messages", "encode_prompt", "example_sources",
           "extract_code", "render_prompt"]
