"""The Proposer's prompt, and reading a proposed module back out of its completion.

The prompt names an API set, says how each API is called and what its arguments must satisfy
(from the catalog), shows the KernelBench format with the Coder prompt's example reference, and
states the rules that module validation enforces, so that a proposal is not rejected for a rule
it was never told. It is rendered and tokenised like the Coder's (coder.prompts.render_prompt /
encode_prompt): the two policies share the sampler and tokenizer code.

`read_proposal` extracts the module (the last code block defining `class Model`, by the Coder's
extraction rules) and runs the checks that need no execution: the KernelBench format, the
sandbox's capability checks (a proposed module becomes a reference, so it may compute with torch
but reach nothing a candidate may not: no os, subprocess, ctypes, introspection, monkey-patching),
and that `forward` really computes with every requested API. What needs execution (it runs on the
device, finite, deterministic, input dependent, within time and memory bounds) is the sandbox's.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from kernelzero_jax.coder.extract import extract_code
from kernelzero_jax.coder.prompts import example_sources, fenced
from kernelzero_jax.proposer import catalog
from kernelzero_jax.sandbox import static_checks
from kernelzero_jax.tasks.kernelbench import TaskError, validate_reference_source

_SYSTEM = ("You are an expert PyTorch engineer. You write small, realistic PyTorch modules that "
           "serve as benchmark problems for GPU kernel optimization.")

_INSTRUCTION = (
    "Write a new PyTorch module in the KernelBench format that combines these operations:\n"
    "{apis}\n"
    "\n"
    "Rules:\n"
    "- Define `class Model(nn.Module)` whose forward uses every operation listed above, and the "
    "functions `get_inputs()` (the forward's input tensors) and `get_init_inputs()` (the "
    "constructor's arguments).\n"
    "- The output must depend on the inputs, be deterministic (no dropout in training mode, no "
    "random numbers in forward) and be finite; it must not be constant or close to zero.\n"
    "- Keep the tensors moderate: every input under {max_elements} elements.\n"
    "- Import only torch, torch.nn, torch.nn.functional and math. No testing code.\n"
    "\n"
    "The format, by example:\n"
    "\n"
    "{example}"
    "\n"
    "Answer with the complete module in a single ```python code block.")

MAX_INPUT_ELEMENTS = 2 ** 24


def describe_api(name: str) -> str:
  """One line of the prompt: the API, how to call it, its constraints."""
  api = catalog.BY_NAME[name]
  text = f"- {api.name} ({api.category}): e.g. `{api.call}`"
  return text + (f"; {api.constraints}" if api.constraints else "")


def proposer_messages(apis: Sequence[str], max_input_elements: int = MAX_INPUT_ELEMENTS
                      ) -> list[dict[str, str]]:
  """The chat messages ([system, user]) that ask for a module combining `apis`."""
  unknown = [a for a in apis if a not in catalog.BY_NAME]
  if not apis or unknown:
    raise ValueError(f"need a non-empty set of catalog APIs; unknown: {unknown}")
  if len(set(apis)) != len(apis):
    raise ValueError(f"repeated APIs in {list(apis)}")
  user = _INSTRUCTION.format(apis="\n".join(describe_api(a) for a in apis),
                             max_elements=f"{max_input_elements:,}",
                             example=fenced(example_sources("triton")[0]))
  return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


# Reasons a proposal is rejected before it runs (counted by reason in the metrics).
NO_MODULE = "no_module"
BAD_FORMAT = "bad_format"
FORBIDDEN = "forbidden_capability"
MISSING_APIS = "missing_apis"


@dataclasses.dataclass(frozen=True)
class Proposal:
  source: str | None            # the module, when one was found
  apis_used: frozenset[str]     # catalog APIs its forward computes with
  rejection: str | None         # NO_MODULE / BAD_FORMAT / FORBIDDEN / MISSING_APIS, or None
  reason: str | None            # human-readable

  @property
  def ok(self) -> bool:
    return self.rejection is None


def read_proposal(completion: str, apis: Sequence[str]) -> Proposal:
  """The module in `completion` and the static verdict on it. Never raises."""
  extraction = extract_code(completion, class_name="Model")
  if not extraction.ok:
    return Proposal(None, frozenset(), NO_MODULE, extraction.reason)
  source = extraction.code
  try:
    validate_reference_source(source, "<proposal>")
    used = frozenset(catalog.forward_apis(source))
  except (TaskError, ValueError, SyntaxError, RecursionError) as e:
    return Proposal(source, frozenset(), BAD_FORMAT, str(e))
  # A proposed module becomes a reference: it must reach nothing a candidate may not.
  forbidden = static_checks.check_module(source)
  if forbidden:
    return Proposal(source, used, FORBIDDEN, "; ".join(forbidden[:4]))
  missing = [a for a in apis if a not in used]
  if missing:
    return Proposal(source, used, MISSING_APIS,
                    f"forward does not use {', '.join(missing)} (it uses "
                    f"{', '.join(sorted(used)) or 'no catalog API'})")
  return Proposal(source, used, None, None)
