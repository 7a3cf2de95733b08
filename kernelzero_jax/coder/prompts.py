"""The Coder's prompt: what the policy sees before it writes a `ModelNew`.

It follows the KernelBench one-shot convention: an instruction, an example architecture and its
optimized version for the requested backend, the task's architecture, then the instruction to
answer with `ModelNew` in one ```python block. The wording is this project's own.

The example sources live in examples/ as real Python files, read at runtime, so that the tests
can run them through the sandbox: a broken example would teach the policy a broken pattern.
They are indented with 4 spaces, unlike the package code, because they are prompt text: they
match the KernelBench references that the policy is given and the style it imitates.

The rules in the instruction are the sandbox's (static_checks.py, evidence.py), stated up front
so that a policy is not rewarded 0 for breaking rules it was never told about.
"""

from __future__ import annotations

import functools
import os
from typing import Mapping, Sequence

from kernelzero_jax import tokenizer as tokenizer_lib

EXAMPLES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "examples")
EXAMPLE_REFERENCE = "add_reference.py"
# backend -> the example's ModelNew, under EXAMPLES_DIR.
EXAMPLE_CANDIDATES = {"cuda": "add_cuda.py", "triton": "add_triton.py"}
BACKENDS = ("cuda", "triton")

# backend -> (what the kernels are, how the example's ModelNew builds them).
_BACKEND_TEXT = {
    "cuda": ("CUDA kernels",
             "a custom CUDA kernel, compiled inline with torch.utils.cpp_extension.load_inline "
             "(cpp_sources declares the C++ launcher, cuda_sources holds the kernel and the "
             "launcher, functions names what Python calls)"),
    "triton": ("Triton kernels",
               "a custom Triton kernel (a @triton.jit function) launched over a grid of program "
               "instances"),
}

_SYSTEM = ("You are an expert in GPU programming. You make PyTorch models faster by writing "
           "custom {kernels}.")

_TASK_INTRO = (
    "You replace the PyTorch operators of a given architecture with custom {kernels} to make it "
    "faster. You may fuse several operators into one kernel or change the algorithm (for "
    "example an online softmax), as long as the outputs stay the same.\n"
    "\n"
    "Rules:\n"
    "- forward computes in your own kernels. PyTorch may only allocate tensors and change views "
    "(empty, empty_like, view, reshape, contiguous, ...); PyTorch compute operators (torch.*, "
    "torch.nn.functional, nn layers such as nn.Linear), library kernels (cuBLAS, cuDNN) and "
    "torch.compile are not allowed in forward.\n"
    "- ModelNew takes the same constructor and forward arguments as Model and creates the same "
    "parameters in the same order, so that weights initialised from the same seed match.\n"
    "- Import only torch, triton and small standard modules such as math.\n")

_EXAMPLE = (
    "Here is an example. The given architecture:\n"
    "\n"
    "{reference}"
    "\n"
    "The same architecture with its computation in {how}:\n"
    "\n"
    "{candidate}")

_TASK = (
    "You are given the following architecture:\n"
    "\n"
    "{reference}"
    "\n"
    "Optimize the architecture named Model with custom {kernels}. Name the optimized "
    "architecture ModelNew. Output the complete new architecture in a single ```python code "
    "block: real code that compiles and runs, not pseudocode, and no testing code (no example "
    "usage, no __main__ block).")


_COMPACT_TASK = (
    "{reference}"
    "\n"
    "Write ModelNew: Model with its forward computed in custom {kernels}, in one ```python "
    "block.")

# How much the prompt says besides the task's architecture:
#   one_shot:  the rules, a worked example and the task (the KernelBench convention);
#   zero_shot: the rules and the task;
#   compact:   the task and one line of instruction, for a policy trained on this format (the
#              tiny warm start, whose compute goes mostly to prompt tokens otherwise).
PROMPT_STYLES = ("one_shot", "zero_shot", "compact")


def _check_backend(backend: str) -> None:
  if backend not in BACKENDS:
    raise ValueError(f"unknown Coder backend {backend!r}; expected one of {BACKENDS}")


@functools.lru_cache(maxsize=None)
def _read_example(name: str) -> str:
  with open(os.path.join(EXAMPLES_DIR, name), encoding="utf-8") as f:
    return f.read()


def example_sources(backend: str) -> tuple[str, str]:
  """(reference, ModelNew) sources of the one-shot example for `backend`."""
  _check_backend(backend)
  return _read_example(EXAMPLE_REFERENCE), _read_example(EXAMPLE_CANDIDATES[backend])


def fenced(source: str) -> str:
  """`source` verbatim in a ```python block (a newline is added only where it is missing)."""
  body = source if source.endswith("\n") else source + "\n"
  return f"```python\n{body}```\n"


def coder_messages(reference_source: str, backend: str,
                   prompt_style: str = "one_shot") -> list[dict[str, str]]:
  """The chat messages ([system, user]) that ask for a `ModelNew` of `reference_source`.

  `prompt_style` (PROMPT_STYLES): "zero_shot" leaves the example out, "compact" the rules too
  (shorter prompts for a policy that already knows the format, e.g. after SFT).
  """
  _check_backend(backend)
  if prompt_style not in PROMPT_STYLES:
    raise ValueError(f"unknown prompt style {prompt_style!r}; expected one of {PROMPT_STYLES}")
  kernels, how = _BACKEND_TEXT[backend]
  system = {"role": "system", "content": _SYSTEM.format(kernels=kernels)}
  if prompt_style == "compact":
    return [system, {"role": "user", "content": _COMPACT_TASK.format(
        reference=fenced(reference_source), kernels=kernels)}]
  parts = [_TASK_INTRO.format(kernels=kernels)]
  if prompt_style == "one_shot":
    example_reference, example_candidate = example_sources(backend)
    parts.append(_EXAMPLE.format(reference=fenced(example_reference), how=how,
                                 candidate=fenced(example_candidate)))
  parts.append(_TASK.format(reference=fenced(reference_source), kernels=kernels))
  return [system, {"role": "user", "content": "\n".join(parts)}]


def _check_messages(messages: Sequence[Mapping[str, str]]) -> None:
  if not messages:
    raise ValueError("no messages to render")
  for m in messages:
    if (not isinstance(m, Mapping) or not isinstance(m.get("role"), str)
        or not isinstance(m.get("content"), str)):
      raise ValueError(f"a message needs a str 'role' and 'content', got {m!r}")


def _render_plain(messages: Sequence[Mapping[str, str]]) -> str:
  """For a tokenizer without a chat template (a base model): role-labelled paragraphs, ending
  with the assistant's label so that the completion is the answer."""
  turns = [f"{m['role'].capitalize()}:\n{m['content']}\n\n" for m in messages]
  return "".join(turns) + "Assistant:\n"


def render_prompt(messages: Sequence[Mapping[str, str]], tokenizer=None) -> str:
  """The prompt text of `messages`, ending where the assistant's answer starts.

  The tokenizer's chat template when it has one (an instruct model is trained on exactly that
  layout), else a plain-text rendering.
  """
  _check_messages(messages)
  if tokenizer is not None and getattr(tokenizer, "chat_template", None):
    return tokenizer_lib.render_chat(tokenizer, messages, add_generation_prompt=True)
  return _render_plain(messages)


def encode_prompt(tokenizer, messages: Sequence[Mapping[str, str]]) -> list[int]:
  """Token ids of render_prompt(messages, tokenizer). The rendered text already holds every
  special token the template wants, so the tokenizer adds none (no second BOS)."""
  return list(tokenizer.encode(render_prompt(messages, tokenizer), add_special_tokens=False))
