"""The Proposer's RL environment: API sets in, frontier rewards out.

`make_prompts` draws an API set per prompt (ApiSetSampler, leaning toward the APIs the Coder
fails on through the pool's per-API pass rates) and renders the Proposer prompt for it. `score`
turns each completion into a reward, in stages that each reject with a named reason:

  1. static reading (prompts.read_proposal): no_module, bad_format, forbidden_capability,
     missing_apis;
  2. duplicate: the same module (normalised source hash) is already in the pool;
  3. runtime validation in sandbox workers (sandbox.validate_module): does_not_run, timeout,
     too_much_memory, too_large, no_tensor_output, not_finite, nondeterministic,
     constant_output, input_independent, too_slow;
  4. the Coder's pass rate p over k samples of the module (a `CoderProbe`), and the reward
     schedule of `FrontierConfig.reward` at p. Invalid modules get `invalid_reward` (rho < 0).
     A sample whose judging failed on the reference's side (its result's `reference_error`: the
     reference did not load or run in that judge, a candidate's memory say) says nothing about
     the Coder and is left out of p; where every sample's did, the module is
     `reference_failed`: invalid, though validation ran it, since no judge can grade it. Where
     no reference worked in the whole step's probe, the sandbox failed, not the modules: those
     results also carry `reference_error`, so the learner leaves their groups out of the loss.

Identical proposals within one step are validated and probed once and share the verdict. Every
valid module enters the pool with its k attempts recorded. A result carries "reward" (the
learner's "environment" reward schedule reads it), "correct" (= valid, so the learner's accuracy
is the validity rate) and "status" (the rejection, or "valid"), so rejection reasons are counted
in the step's count_by_status metrics.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any, Protocol, Sequence

import numpy as np

from kernelzero_jax.coder import prompts as coder_prompts
from kernelzero_jax.metrics import StepTotals
from kernelzero_jax.proposer import prompts as prompts_lib
from kernelzero_jax.proposer.api_sets import ApiSetSampler
from kernelzero_jax.proposer.frontier import FrontierConfig, ModulePool, normalized_source_hash
from kernelzero_jax.proposer.frontier import proposer_reward
from kernelzero_jax.rl.learner import Completion, Prompt
from kernelzero_jax.sandbox.evaluate import SandboxPool
from kernelzero_jax.sandbox.module_check import ModuleLimits

VALID = "valid"
DUPLICATE = "duplicate"
REFERENCE_FAILED = "reference_failed"


class CoderProbe(Protocol):
  """Asks the Coder for `k` kernels of each module and judges them: per module, the k results
  (dicts with at least "correct")."""

  def attempt(self, step: int, sources: Sequence[str], k: int) -> list[list[dict]]: ...


@dataclasses.dataclass(frozen=True)
class ProposalSettings:
  api_set_sizes: tuple[int, ...] = (2, 3)   # drawn uniformly per prompt
  max_input_elements: int = prompts_lib.MAX_INPUT_ELEMENTS  # stated in the prompt
  limits: ModuleLimits = ModuleLimits()     # enforced by validation

  def __post_init__(self):
    if not self.api_set_sizes or min(self.api_set_sizes) < 1:
      raise ValueError(f"api_set_sizes must be positive sizes, got {self.api_set_sizes}")


class ProposerEnvironment:
  """Proposer prompts over API sets; rewards from validation and the Coder's frontier."""

  def __init__(self, tokenizer, api_sampler: ApiSetSampler, pool: ModulePool,
               sandbox: SandboxPool, probe: CoderProbe,
               settings: ProposalSettings = ProposalSettings(), progress: bool = False):
    too_big = [n for n in settings.api_set_sizes if n > len(api_sampler.apis)]
    if too_big:
      raise ValueError(f"api_set_sizes {too_big} exceed the {len(api_sampler.apis)} APIs of the "
                       "sampler's vocabulary")
    self.tokenizer = tokenizer
    self.api_sampler = api_sampler
    self.pool = pool
    self.sandbox = sandbox
    self.probe = probe
    self.settings = settings
    self.progress = progress
    self._totals = StepTotals()

  @property
  def frontier(self) -> FrontierConfig:
    return self.pool.config

  def make_prompts(self, step: int, num_prompts: int, rng: np.random.Generator) -> list[Prompt]:
    del step
    self.api_sampler.set_weights(self.pool.api_weights(self.api_sampler.apis))
    prompts = []
    for _ in range(num_prompts):
      size = int(rng.choice(self.settings.api_set_sizes))
      apis = self.api_sampler.sample(rng, size)
      ids = coder_prompts.encode_prompt(self.tokenizer, prompts_lib.proposer_messages(
          apis, self.settings.max_input_elements))
      prompts.append(Prompt(task_id="+".join(apis), token_ids=tuple(ids), payload=apis))
    return prompts

  def decode(self, token_ids: Sequence[int]) -> str:
    return self.tokenizer.decode(list(token_ids), skip_special_tokens=False)

  def _invalid(self, status: str, reason: str | None, apis: Sequence[str],
               reference_error: bool = False) -> dict:
    return {"correct": False, "status": status, "speedup": None,
            "reward": proposer_reward(self.frontier, False), "pass_rate": None,
            "apis": list(apis), "reasons": [reason] if reason else [],
            "reference_error": reference_error}

  def score(self, step: int, prompts: Sequence[Prompt], completions: Sequence[Completion]
            ) -> list[dict]:
    t0 = time.perf_counter()
    results: list[dict | None] = [None] * len(completions)
    # key -> (source, apis, indices of the completions that proposed it)
    unique: dict[str, tuple[str, tuple[str, ...], list[int]]] = {}
    statically_ok = 0
    for i, c in enumerate(completions):
      apis = tuple(prompts[c.prompt_index].payload)
      proposal = prompts_lib.read_proposal(c.text, apis)
      if not proposal.ok:
        results[i] = self._invalid(proposal.rejection, proposal.reason, apis)
        continue
      statically_ok += 1
      key = normalized_source_hash(proposal.source)
      if key in self.pool.entries:
        results[i] = self._invalid(DUPLICATE, "the same module is already in the pool", apis)
        continue
      unique.setdefault(key, (proposal.source, apis, []))[2].append(i)

    keys = list(unique)
    verdicts = self.sandbox.validate_modules([unique[k][0] for k in keys],
                                             self.settings.limits, progress=self.progress)
    t1 = time.perf_counter()
    valid_keys = []
    for key, verdict in zip(keys, verdicts):
      source, apis, indices = unique[key]
      if verdict.valid:
        valid_keys.append(key)
        continue
      for i in indices:
        results[i] = self._invalid(verdict.rejection or "does_not_run",
                                   "; ".join(verdict.reasons[:2]) or None, apis)

    k = self.frontier.samples_per_module
    attempts = self.probe.attempt(step, [unique[key][0] for key in valid_keys], k) \
        if valid_keys else []
    t2 = time.perf_counter()
    accepted, reference_failed, pass_rates = 0, 0, []
    sandbox_failed = bool(attempts) and all(r.get("reference_error") for tries in attempts
                                            for r in tries)
    if sandbox_failed:
      logging.warning("proposer step %d: every judging's reference failed in the Coder's "
                      "probe of %d modules: the sandbox is failing; their groups are left out "
                      "of the loss", step, len(attempts))
    for key, tries in zip(valid_keys, attempts):
      source, apis, indices = unique[key]
      judged = [r for r in tries if not r.get("reference_error")]
      if not judged:
        reasons = [reason for r in tries[:1] for reason in r.get("reasons") or []]
        for i in indices:
          results[i] = self._invalid(
              REFERENCE_FAILED, "its reference failed in every judging of the Coder's "
              f"{len(tries)} samples" + (f": {reasons[0]}" if reasons else ""), apis,
              reference_error=sandbox_failed)
        reference_failed += 1
        continue
      num_correct = sum(bool(r["correct"]) for r in judged)
      p = num_correct / len(judged)
      pass_rates.append(p)
      reward = proposer_reward(self.frontier, True, num_correct, len(judged))
      if self.pool.add(source, apis, step) is not None:
        self.pool.record(key, num_correct, len(judged))
        accepted += 1
      for i in indices:
        results[i] = {"correct": True, "status": VALID, "speedup": None, "reward": reward,
                      "pass_rate": p, "apis": list(apis), "reasons": [],
                      "reference_error": False}
    self._totals.add(step, proposals_statically_ok=statically_ok,
                     unique_modules_validated=len(keys),
                     valid_modules=len(valid_keys) - reference_failed,
                     reference_failed_modules=reference_failed, accepted_into_pool=accepted,
                     time_validate_s=t1 - t0, time_probe_s=t2 - t1, pass_rates=pass_rates)
    logging.info("proposer step %d: %d completions, %d distinct modules validated, %d valid, "
                 "%d whose reference failed under the Coder's judges, %d accepted; pool %d",
                 step, len(completions), len(keys), len(valid_keys) - reference_failed,
                 reference_failed, accepted, len(self.pool))
    return results  # type: ignore[return-value]

  def step_metrics(self, step: int) -> dict[str, Any]:
    del step
    if self._totals.step is None:  # nothing scored yet
      return {}
    totals = dict(self._totals.values)
    pass_rates = totals.pop("pass_rates")
    return {**totals, "pool_size": len(self.pool),
            "frontier_modules": self.pool.frontier_size(),
            "valid_pass_rate_mean": float(np.mean(pass_rates)) if pass_rates else None}
