"""The Coder's RL environment: reference modules in, sandbox verdicts out.

`make_prompts` draws reference modules and renders the Coder prompt for each; `score` extracts
the `ModelNew` source of every completion and judges all of them with one `SandboxPool` batch.
A completion with no usable code block gets status `format_error` (with the extractor's reason)
without reaching the sandbox; identical candidates for the same module (common within a group)
are judged once.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Sequence

import numpy as np

from kernelzero_jax.coder import prompts as prompts_lib
from kernelzero_jax.coder.extract import extract_code
from kernelzero_jax.rl import rewards
from kernelzero_jax.rl.learner import Completion, LearnerConfig, Prompt
from kernelzero_jax.sandbox import verdict as V
from kernelzero_jax.sandbox.config import SandboxConfig
from kernelzero_jax.sandbox.evaluate import Job, SandboxPool, cuda_visible
from kernelzero_jax.tasks.kernelbench import Task, TaskError, load_reference_file

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The embedded default's training modules: small references that ship with the package.
DEFAULT_MODULES = (os.path.join(_PACKAGE_DIR, "coder", "examples", "add_reference.py"),
                   os.path.join(_PACKAGE_DIR, "examples", "scaled_relu_reference.py"))


def load_modules(paths: Sequence[str]) -> tuple[list[Task], list[str]]:
  """Reference modules from files and directories (every *.py inside, sorted).

  Returns (tasks, problems): a file that does not load or is not a KernelBench-format module is
  reported in `problems` and skipped, so one broken file does not stop a run; a path that does
  not exist is an error.
  """
  files: list[str] = []
  for path in paths:
    if os.path.isdir(path):
      files.extend(os.path.join(path, n) for n in sorted(os.listdir(path))
                   if n.endswith(".py") and not n.startswith("_"))
    elif os.path.isfile(path):
      files.append(path)
    else:
      raise TaskError(f"training module path {path} does not exist")
  tasks, problems = [], []
  for f in files:
    try:
      tasks.append(load_reference_file(f))
    except TaskError as e:
      problems.append(f"{f}: {e}")
  return tasks, problems


def _result(verdict: V.Verdict) -> dict:
  return {"correct": verdict.correct, "status": verdict.status, "speedup": verdict.speedup,
          "reasons": list(verdict.reasons[:3]), "reference_error": verdict.reference_error,
          "degenerate": list(verdict.degenerate)}


def sandbox_for_reward(sandbox: SandboxConfig, learner: LearnerConfig) -> SandboxConfig:
  """`sandbox` with its candidates' timings precise only between the speedups the Coder's reward
  tells apart (rewards.rewarded_speedups -> SandboxConfig.speedup_band); as it is where it sets
  a band itself, or where the reward's is not known."""
  if sandbox.speedup_band is not None:
    return sandbox
  band = rewards.rewarded_speedups(learner.reward_schedule, learner.reward)
  return sandbox if band is None else dataclasses.replace(sandbox, speedup_band=band)


class CoderEnvironment:
  """Coder prompts over `modules`, judged by the sandbox with `backend` kernels."""

  def __init__(self, modules: Sequence[Task], tokenizer, backend: str,
               sandbox_config: SandboxConfig, max_parallel: int | None = None,
               prompt_style: str = "one_shot", progress: bool = False):
    if not modules:
      raise ValueError("the Coder environment needs at least one reference module")
    self._init_judging(tokenizer, backend, sandbox_config, max_parallel, prompt_style, progress)
    self.modules = list(modules)
    self._prompt_ids = [self.prompt_ids(m.source) for m in self.modules]

  def _init_judging(self, tokenizer, backend: str, sandbox_config: SandboxConfig,
                    max_parallel: int | None, prompt_style: str, progress: bool) -> None:
    """What every Coder environment has, whatever its modules: prompts and the sandbox."""
    if backend not in prompts_lib.BACKENDS:
      raise ValueError(f"unknown backend {backend!r}; expected one of {prompts_lib.BACKENDS}")
    if sandbox_config.device == "cuda" and not cuda_visible():
      raise ValueError("sandbox.device is 'cuda' but no GPU is visible; on a CPU machine use "
                       "backend 'triton' with sandbox.device 'cpu' (the Triton interpreter)")
    if backend == "cuda" and sandbox_config.device != "cuda":
      raise ValueError("CUDA candidates need sandbox.device 'cuda'")
    self.tokenizer = tokenizer
    self.backend = backend
    self.prompt_style = prompt_style
    self.sandbox = SandboxPool(sandbox_config, max_parallel=max_parallel)
    # Its server and shared builds start while the policy samples the first candidates.
    self.sandbox.warm_up([backend])
    self.progress = progress
    self._prompt_cache: dict[str, tuple[int, ...]] = {}

  def prompt_ids(self, source: str) -> tuple[int, ...]:
    """The Coder prompt for a reference module, tokenised (once per module)."""
    if source not in self._prompt_cache:
      self._prompt_cache[source] = tuple(prompts_lib.encode_prompt(
          self.tokenizer, prompts_lib.coder_messages(source, self.backend, self.prompt_style)))
    return self._prompt_cache[source]

  def make_prompts(self, step: int, num_prompts: int, rng: np.random.Generator) -> list[Prompt]:
    """`num_prompts` modules drawn without replacement while there are enough, uniformly."""
    del step
    n = len(self.modules)
    idx = rng.permutation(n)[:num_prompts] if num_prompts <= n else rng.integers(n, size=num_prompts)
    return [Prompt(task_id=self.modules[i].key, token_ids=self._prompt_ids[i],
                   payload=self.modules[i].source) for i in idx]

  def decode(self, token_ids: Sequence[int]) -> str:
    # Special tokens are kept: the extractor uses an end-of-turn token to tell a finished
    # answer from a truncated one.
    return self.tokenizer.decode(list(token_ids), skip_special_tokens=False)

  def score(self, step: int, prompts: Sequence[Prompt], completions: Sequence[Completion]
            ) -> list[dict]:
    results: list[dict | None] = [None] * len(completions)
    jobs: list[Job] = []
    job_of: dict[tuple[int, str], int] = {}
    waiting: list[tuple[int, int]] = []  # (completion index, job index)
    for i, c in enumerate(completions):
      extraction = extract_code(c.text)
      if not extraction.ok:
        results[i] = {"correct": False, "status": V.FORMAT_ERROR, "speedup": None,
                      "reasons": [extraction.reason], "reference_error": False,
                      "degenerate": []}
        continue
      key = (c.prompt_index, extraction.code)
      if key not in job_of:
        job_of[key] = len(jobs)
        jobs.append(Job(reference_source=prompts[c.prompt_index].payload,
                        candidate_source=extraction.code, backend=self.backend,
                        name=f"step{step}/{prompts[c.prompt_index].task_id}"))
      waiting.append((i, job_of[key]))
    verdicts = self.sandbox.evaluate(jobs, progress=self.progress) if jobs else []
    for i, j in waiting:
      results[i] = _result(verdicts[j])
    logging.info("step %d: judged %d distinct candidates of %d completions", step, len(jobs),
                 len(completions))
    return results  # type: ignore[return-value]

