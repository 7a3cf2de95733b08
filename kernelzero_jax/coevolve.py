"""KernelZero's co-evolution loop: what `python -m experiments.coevolve` runs.

  config = configs.from_mapping(CoevolveConfig, experiment_config)
  run(config, workdir)

Two policies with their own optimizers alternate for `num_rounds` rounds:
  Proposer phase  `proposer.num_steps` GRPO steps: API sets -> proposed modules -> validation ->
                  the Coder's pass rate p over k samples -> frontier reward (ProposerEnvironment).
                  Valid modules enter the pool.
  Coder phase     `coder.num_steps` CA-GRPO steps on modules drawn from the pool, frontier first
                  (PoolCoderEnvironment); their verdicts update the pool's pass rates.
  Evaluation      optionally, KernelBench with the Coder at the end of each round.

The Proposer goes first: the Coder trains on what it proposes. A seed pool (the package's example
references, or `seed_modules`) gives the Coder work before any proposal is valid.

One global step counts both phases. Every checkpoint is one Orbax checkpoint holding both
policies' train states (parameters, optimizer states) and, as JSON, the pool and the step, so a
killed run resumes from the workdir exactly where its last checkpoint left it. The workdir holds
config.json, metrics.jsonl and tb/ (every step, keys prefixed by phase), phases.json (one summary
per finished phase), each policy's samples under proposer/samples and coder/samples, the
co-occurrence cache, and eval/round_N/ when KernelBench evaluation is on.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections import defaultdict
from typing import Any, Optional, Sequence

import numpy as np

from kernelzero_jax import atomic_file
from kernelzero_jax import configs
from kernelzero_jax.coder.environment import (DEFAULT_MODULES, CoderEnvironment, load_modules,
                                              sandbox_for_reward)
from kernelzero_jax.metrics import MetricsWriter, StepTotals, read_jsonl
from kernelzero_jax.model.sharding import ShardingConfig
from kernelzero_jax.policy import PolicyConfig, load_policy
from kernelzero_jax.proposer import catalog
from kernelzero_jax.proposer.api_sets import (ApiSetSampler, Cooccurrence, mine_cooccurrence,
                                              transformers_cooccurrence)
from kernelzero_jax.proposer.environment import ProposalSettings, ProposerEnvironment
from kernelzero_jax.proposer.frontier import FrontierConfig, ModulePool, normalized_source_hash
from kernelzero_jax.rl.checkpointing import Checkpointer
from kernelzero_jax.rl.learner import Completion, Learner, LearnerConfig, Prompt
from kernelzero_jax.sandbox.config import SandboxConfig
from kernelzero_jax.tasks.kernelbench import TaskError
from kernelzero_jax.teacher.family import KINDS

PHASES = ("proposer", "coder")


@dataclasses.dataclass(frozen=True)
class RoundEvalConfig:
  """KernelBench evaluation of the Coder at the end of every round (off without a directory)."""
  kernelbench_dir: Optional[str] = None
  levels: tuple[int, ...] = (1, 2)
  problem_ids: tuple[str, ...] = ()  # a subset, as in eval_kernelbench ("19", "2/12")
  num_samples: int = 1
  temperature: float = 0.0
  max_new_tokens: int = 4096


@dataclasses.dataclass(frozen=True)
class CoevolveConfig:
  seed: int = 0
  num_rounds: int = 4
  proposer_policy: PolicyConfig = PolicyConfig(init_seed=1)
  coder_policy: PolicyConfig = PolicyConfig()
  # Steps per phase are each learner's num_steps (the paper: 20 and 20); its optimizer schedule
  # spans all rounds (total_steps >= num_rounds * num_steps for a decaying schedule).
  proposer: LearnerConfig = LearnerConfig(num_steps=20, reward_schedule="environment")
  coder: LearnerConfig = LearnerConfig(num_steps=20)
  frontier: FrontierConfig = FrontierConfig()
  proposals: ProposalSettings = ProposalSettings()
  apis: tuple[str, ...] = ()          # the API vocabulary (empty: the whole catalog)
  # Where API co-occurrence comes from: "transformers" (the installed package's model files), a
  # directory of Torch code (every *.py below it), or a JSON file of a mined Cooccurrence.
  cooccurrence: str = "transformers"
  api_smoothing: float = 1.0
  backend: str = "triton"
  prompt_style: str = "one_shot"      # the Coder's (coder.prompts.PROMPT_STYLES)
  seed_modules: tuple[str, ...] = ()  # the pool's first modules (empty: the package's examples)
  seed_teacher_modules: int = 0       # and this many small modules of the teacher's family,
  seed_teacher_max_ops: int = 0       # each of at most this many operations (0: any number)
  seed_teacher_kinds: tuple[str, ...] = KINDS  # and of these kinds (teacher.family.KINDS)
  sandbox: SandboxConfig = dataclasses.field(default_factory=SandboxConfig)
  # The Coder's candidates timed precisely only between the speedups its reward tells apart
  # (coder.environment.sandbox_for_reward); the rounds' evaluations time all as `sandbox` says.
  time_rewarded_speedups: bool = True
  max_parallel: int = 0               # concurrent sandbox judges; 0: one per CPU core
  eval: RoundEvalConfig = RoundEvalConfig()
  checkpoint_every: int = 1           # global steps; phase ends are always checkpointed
  max_checkpoints: int = 2
  use_mesh: bool = False              # both policies on a mesh of all devices (7B policies)
  sharding: ShardingConfig = ShardingConfig()

  def __post_init__(self):
    if self.num_rounds < 1 or self.checkpoint_every < 1:
      raise ValueError("num_rounds and checkpoint_every must be >= 1")
    if self.proposer.num_steps < 1 or self.coder.num_steps < 1:
      raise ValueError("proposer.num_steps and coder.num_steps (steps per phase) must be >= 1")
    if self.proposer.reward_schedule != "environment":
      raise ValueError("proposer.reward_schedule must be 'environment': the Proposer's reward "
                       "is frontier.reward at the Coder's pass rate; choose it there")
    if not self.seed_teacher_kinds or set(self.seed_teacher_kinds) - set(KINDS):
      raise ValueError(f"seed_teacher_kinds must be some of {KINDS}, got "
                       f"{self.seed_teacher_kinds}")
    if self.seed_teacher_max_ops < 0:
      raise ValueError(f"seed_teacher_max_ops must be >= 0, got {self.seed_teacher_max_ops}")
    unknown = sorted(set(self.apis) - set(catalog.BY_NAME))
    if unknown:
      raise ValueError(f"apis not in the catalog: {unknown}")

  @property
  def coder_sandbox(self) -> SandboxConfig:
    """The sandbox config the Coder's RL judges with (time_rewarded_speedups)."""
    return (sandbox_for_reward(self.sandbox, self.coder) if self.time_rewarded_speedups
            else self.sandbox)

  @property
  def steps_per_round(self) -> int:
    return self.proposer.num_steps + self.coder.num_steps

  @property
  def total_steps(self) -> int:
    return self.num_rounds * self.steps_per_round

  def locate(self, global_step: int) -> tuple[int, str, int]:
    """(round, phase, that policy's own step), all 1-based, of a global step."""
    r, i = divmod(global_step - 1, self.steps_per_round)
    if i < self.proposer.num_steps:
      return r + 1, "proposer", r * self.proposer.num_steps + i + 1
    return r + 1, "coder", r * self.coder.num_steps + i - self.proposer.num_steps + 1


class PoolCoderEnvironment(CoderEnvironment):
  """The Coder's environment over the module pool: frontier-first modules, and their verdicts
  recorded back into the pool's pass rates."""

  def __init__(self, pool: ModulePool, tokenizer, backend: str, sandbox_config: SandboxConfig,
               max_parallel: int | None = None, prompt_style: str = "one_shot",
               progress: bool = False):
    # pylint: disable-next=super-init-not-called
    self._init_judging(tokenizer, backend, sandbox_config, max_parallel, prompt_style, progress)
    self.modules = pool
    self._totals = StepTotals()
    self._removed_total = 0  # modules whose reference failed in a whole group, over the run

  def make_prompts(self, step: int, num_prompts: int, rng: np.random.Generator) -> list[Prompt]:
    del step
    if not len(self.modules):
      raise RuntimeError(
          "the module pool is empty: no seed module and no valid proposal yet" + (
              f"; {self._removed_total} module(s) left it because their reference failed in "
              "every judging of a group (the warnings above say why)"
              if self._removed_total else ""))
    picks = self.modules.select(rng, num_prompts)
    while len(picks) < num_prompts:  # a pool smaller than a batch: modules repeat
      picks += self.modules.select(rng, num_prompts - len(picks))
    return [Prompt(task_id=f"pool/{e.key[:12]}", token_ids=self.prompt_ids(e.source),
                   payload=e.source) for e in picks]

  def score(self, step: int, prompts: Sequence[Prompt], completions: Sequence[Completion]
            ) -> list[dict]:
    results = super().score(step, prompts, completions)
    speedups = [r["speedup"] for r in results
                if r["correct"] and r.get("speedup") and np.isfinite(r["speedup"])
                and r["speedup"] > 0]
    # A sample whose judging failed on the reference's side says nothing of the Coder (the
    # learner leaves its group out); a module whose reference failed in all of a group's
    # judgings leaves the pool, which would otherwise keep handing it out (the Proposer's
    # environment does not let such a module in: REFERENCE_FAILED). Unless no reference
    # worked in the whole batch: that says the sandbox failed, not the modules.
    by_prompt: dict[int, list[dict]] = defaultdict(list)
    for c, r in zip(completions, results):
      by_prompt[c.prompt_index].append(r)
    any_reference_worked = any(not r.get("reference_error") for r in results)
    removed = 0
    for i, group in by_prompt.items():
      key = normalized_source_hash(prompts[i].payload)
      if key not in self.modules.entries:
        continue
      judged = [bool(r["correct"]) for r in group if not r.get("reference_error")]
      if judged:
        self.modules.record(key, sum(judged), len(judged))
      elif any_reference_worked:
        self.modules.remove(key)
        removed += 1
        logging.warning("pool module %s removed: its reference failed in all %d judgings (%s)",
                        key[:12], len(group), "; ".join(group[0].get("reasons") or [])[:300])
    if results and not any_reference_worked:
      logging.warning("every judging's reference failed in this batch of %d (%s): the sandbox "
                      "is failing, no module leaves the pool for it", len(results),
                      "; ".join(results[0].get("reasons") or [])[:300])
    self._removed_total += removed
    self._totals.add(step, num_speedups=len(speedups),
                     log_speedup_sum=float(np.sum(np.log(speedups))) if speedups else 0.0,
                     reference_failed_modules_removed=removed)
    return results

  def step_metrics(self, step: int) -> dict[str, Any]:
    del step
    return {"pool_size": len(self.modules), "frontier_modules": self.modules.frontier_size(),
            **self._totals.values}


class PolicyProbe:
  """The Coder's pass rate on proposed modules: k samples from its current parameters (with its
  rollout settings), judged like its own rollouts."""

  def __init__(self, learner: Learner, env: CoderEnvironment, seed: int):
    self.learner = learner
    self.env = env
    self.seed = seed

  def attempt(self, step: int, sources: Sequence[str], k: int) -> list[list[dict]]:
    prompts = [Prompt(task_id=f"proposal/{i}", token_ids=self.env.prompt_ids(s), payload=s)
               for i, s in enumerate(sources)]
    seed = int(np.random.default_rng([self.seed, step, 1]).integers(2**31))
    completions, _ = self.learner.sample(prompts, k, seed, self.env.decode)
    # The plain Coder scoring: these modules are not in the pool yet, and the Proposer's
    # environment records the attempts of those that join it.
    results = CoderEnvironment.score(self.env, step, prompts, completions)
    return [results[i * k:(i + 1) * k] for i in range(len(sources))]


def load_cooccurrence(source: str, cache_dir: str) -> Cooccurrence:
  if source == "transformers":
    return transformers_cooccurrence(cache_dir)
  if os.path.isfile(source) and source.endswith(".json"):
    with open(source, encoding="utf-8") as f:
      return Cooccurrence.from_dict(json.load(f))
  if os.path.isdir(source):
    files = sorted(os.path.join(d, n) for d, _, names in os.walk(source) for n in names
                   if n.endswith(".py"))
    if files:
      return mine_cooccurrence(files)
  raise configs.ConfigError(f"cooccurrence {source!r} is neither 'transformers', a directory of "
                            "Python files, nor a .json co-occurrence file")


def seed_modules(config: CoevolveConfig) -> list[str]:
  """The pool's first modules: `seed_modules` (files or directories; default the package's
  example references) and `seed_teacher_modules` small train-split modules of the teacher's
  family (what a warm-started Coder was trained on), of `seed_teacher_kinds` and at most
  `seed_teacher_max_ops` operations when set, so that a weak Coder solves some of them. A file
  that does not load is skipped with a warning; none at all, or teacher modules that cannot be
  drawn, is a config error (the Coder's first phase would have nothing)."""
  paths = config.seed_modules or DEFAULT_MODULES
  try:
    tasks, problems = load_modules(paths)
  except TaskError as e:
    raise configs.ConfigError(f"seed_modules: {e}") from e
  for p in problems:
    logging.warning("skipping a seed module: %s", p)
  sources = [t.source for t in tasks]
  if config.seed_teacher_modules:
    # pylint: disable-next=import-outside-toplevel
    from kernelzero_jax.teacher.generator import generate_modules
    try:
      sources += [src for _, src, _ in generate_modules(
          config.seed_teacher_modules, seed=config.seed + 1_000, split="train", size="small",
          kinds=tuple(config.seed_teacher_kinds), max_ops=config.seed_teacher_max_ops or None)]
    except RuntimeError as e:  # no such modules in the train split
      raise configs.ConfigError(f"seed_teacher_*: {e}") from e
  if not sources:
    raise configs.ConfigError(f"no usable seed module in {list(paths)}: {problems}")
  return sources


class Coevolution:
  """Both learners, the pool, and the alternating schedule over them."""

  def __init__(self, config: CoevolveConfig, workdir: str, cooccurrence: Cooccurrence,
               seed_sources: Sequence[str], progress: bool = True):
    """`cooccurrence` weights the API sets; `seed_sources` start the pool of a fresh run."""
    # pylint: disable-next=import-outside-toplevel
    from kernelzero_jax.tokenizer import eos_token_ids, pad_token_id
    self.config = config
    self.workdir = workdir
    self.seed_sources = list(seed_sources)
    self.progress = progress
    self.pool = ModulePool(config.frontier)
    mesh = config.sharding.make_mesh() if config.use_mesh else None
    coder_model, self.coder_tokenizer = load_policy(config.coder_policy, "float32")
    proposer_model, proposer_tokenizer = load_policy(config.proposer_policy, "float32")
    self.coder_env = PoolCoderEnvironment(self.pool, self.coder_tokenizer, config.backend,
                                          config.coder_sandbox, config.max_parallel or None,
                                          config.prompt_style)

    def learner(lcfg, model, tokenizer, env):
      eos = eos_token_ids(tokenizer, model.config)
      return Learner(lcfg, model, env, eos_ids=eos, pad_id=pad_token_id(tokenizer, eos),
                     progress=False, mesh=mesh, sharding=config.sharding)

    self.coder = learner(config.coder, coder_model, self.coder_tokenizer, self.coder_env)
    sampler = ApiSetSampler(cooccurrence, apis=list(config.apis) or None,
                            smoothing=config.api_smoothing)
    probe = PolicyProbe(self.coder, self.coder_env, config.seed)
    self.proposer_env = ProposerEnvironment(proposer_tokenizer, sampler, self.pool,
                                            self.coder_env.sandbox, probe, config.proposals)
    self.proposer = learner(config.proposer, proposer_model, proposer_tokenizer,
                            self.proposer_env)
    self.learners = {"proposer": self.proposer, "coder": self.coder}

  def _states(self) -> dict[str, Any]:
    return {name: learner.state for name, learner in self.learners.items()}

  def run(self) -> dict[str, Any]:
    cfg, workdir = self.config, self.workdir
    os.makedirs(workdir, exist_ok=True)
    with Checkpointer(workdir, max_to_keep=cfg.max_checkpoints) as ckpt:
      start = 0
      restored = ckpt.restore_latest(self._states())
      if restored is None:
        for source in self.seed_sources:
          self.pool.add(source, sorted(catalog.forward_apis(source)), step=0)
      else:
        states, saved = restored
        for name, learner in self.learners.items():
          learner.state = states[name]
        restored_pool = ModulePool.from_dict(cfg.frontier, saved["pool"])
        self.pool.entries = restored_pool.entries  # the environments hold this pool object
        start = int(saved["global_step"])
        logging.info("co-evolution: resumed after global step %d in %s", start, workdir)
      bar = None
      if self.progress:
        from tqdm import tqdm  # pylint: disable=import-outside-toplevel
        bar = tqdm(total=cfg.total_steps, initial=start, desc="co-evolution", unit="step")
      with MetricsWriter(workdir, resume_step=start) as writer:
        if start:
          self._finish_round_evals(start)
        for g in range(start + 1, cfg.total_steps + 1):
          rnd, phase, local = cfg.locate(g)
          t0 = time.perf_counter()
          m = self.learners[phase].step(local, os.path.join(workdir, phase))
          record = {"round": rnd, "phase": phase, "policy_step": local,
                    "time_step_s": time.perf_counter() - t0,
                    **{f"{phase}/{k}": v for k, v in m.items()}}
          writer.write(g, record)
          phase_end = cfg.locate(g + 1)[1] != phase or g == cfg.total_steps
          if g % cfg.checkpoint_every == 0 or phase_end:
            ckpt.save(g, self._states(), {"global_step": g, "pool": self.pool.to_dict()})
            ckpt.wait()  # the next step donates the state: never let it race the write
          if bar is not None:
            bar.update(1)
            bar.set_postfix(round=rnd, phase=phase, reward=f"{m['reward_mean']:.3f}",
                            acc=f"{m['accuracy']:.2f}", pool=len(self.pool))
          if phase_end:
            line = format_phase_summary(write_phase_summaries(workdir)[-1])
            if bar is None:
              print(line, flush=True)
            else:
              bar.write(line)
            if phase == "coder":
              self._finish_round_evals(g)
      if bar is not None:
        bar.close()
    self.coder_env.sandbox.close()
    return self._final_summary()

  # --- KernelBench evaluation at the end of each round -------------------------------------

  def _finish_round_evals(self, done_steps: int) -> None:
    """Runs (or finishes, after a kill) the evaluation of every round completed by now whose
    evaluation is missing; only the last can be, since rounds run in order."""
    if self.config.eval.kernelbench_dir is None:
      return
    rounds_done = done_steps // self.config.steps_per_round
    if rounds_done and not os.path.exists(self._eval_dir(rounds_done, "summary.json")):
      self._evaluate_round(rounds_done)

  def _eval_dir(self, rnd: int, *names: str) -> str:
    return os.path.join(self.workdir, "eval", f"round_{rnd}", *names)

  def _evaluate_round(self, rnd: int) -> dict[str, Any]:
    # pylint: disable=import-outside-toplevel
    from kernelzero_jax.evaluation import driver
    e, cfg = self.config.eval, self.config
    samples = self._eval_dir(rnd, "samples")
    ecfg = driver.EvalConfig(
        workdir=self._eval_dir(rnd), kernelbench_dir=e.kernelbench_dir, levels=e.levels,
        problem_ids=e.problem_ids, backend=cfg.backend, num_samples=e.num_samples,
        samples_dir=samples, temperature=e.temperature, max_new_tokens=e.max_new_tokens,
        seed=cfg.seed, prompt_style=cfg.prompt_style, sandbox=cfg.sandbox,
        max_parallel=cfg.max_parallel, progress=self.progress)
    tasks, _ = driver.select_tasks(ecfg)
    driver.write_policy_samples(ecfg, tasks, samples, self.coder.sampler, self.coder_tokenizer,
                                state=self.coder.sampling_state())
    summary = driver.run_eval(ecfg)
    every = summary["levels"]["all"]
    logging.info("round %d KernelBench: %d/%d correct", rnd, every["num_correct"],
                 every["num_samples"])
    return summary

  def _final_summary(self) -> dict[str, Any]:
    phases = write_phase_summaries(self.workdir)
    summary = {"phases": phases, "pool_size": len(self.pool),
               "frontier_modules": self.pool.frontier_size(), "api_stats": self.pool.api_stats()}
    atomic_file.write_json(os.path.join(self.workdir, "summary.json"), summary, indent=2,
                           default=str)
    proposer = [p for p in phases if p["phase"] == "proposer"]
    coder = [p for p in phases if p["phase"] == "coder"]
    valid, correct = sum(p["valid"] for p in proposer), sum(p["correct"] for p in coder)
    accepted = sum(p["accepted"] for p in proposer)
    line = (f"co-evolution: the Proposer wrote {valid} valid modules in "
            f"{sum(p['samples'] for p in proposer)} proposals ({accepted} joined the pool); "
            f"the Coder wrote {correct} correct kernels in {sum(p['samples'] for p in coder)} "
            f"samples; pool {len(self.pool)} modules, frontier {self.pool.frontier_size()}")
    print(line, flush=True)
    logging.info("%s", line)
    if not valid and not correct:
      logging.warning("neither policy succeeded once in this run (no valid module, no correct "
                      "kernel): what policies at random weights do. The learning signal starts "
                      "with warm-started policies (experiments/configs/warm_start_*.py; the "
                      "default config's Coder starts from kernelzero_jax/assets/coder_tiny_warm)")
    return summary


# --- phase summaries: derived from metrics.jsonl, so a resumed run rebuilds them exactly -----

def _phase_summary(rnd: int, phase: str, records: Sequence[dict]) -> dict[str, Any]:
  p = f"{phase}/"

  def values(key):
    return [r[p + key] for r in records if isinstance(r.get(p + key), (int, float))]

  def mean(key):
    v = values(key)
    return float(np.mean(v)) if v else None

  def last(key):
    v = values(key)
    return v[-1] if v else None

  counts: dict[str, int] = defaultdict(int)
  for r in records:
    for k, v in r.items():
      if k.startswith(p + "count_by_status/"):
        counts[k.split("/", 2)[2]] += int(v)
  samples = sum(counts.values())
  out = {"round": rnd, "phase": phase, "steps": len(records), "samples": samples,
         "status_counts": dict(sorted(counts.items(), key=lambda kv: -kv[1])),
         "reward_mean": mean("reward_mean"), "loss": mean("loss"),
         "pool_size": last("env/pool_size"), "frontier_modules": last("env/frontier_modules"),
         "wall_s": round(sum(r.get("time_step_s", 0.0) for r in records), 1),
         "time_sample_s": round(sum(values("time_sample_s")), 1),
         "time_score_s": round(sum(values("time_score_s")), 1),
         "time_train_s": round(sum(values("time_train_s")), 1)}
  if phase == "proposer":
    out.update(valid=counts.get("valid", 0),
               validity_rate=counts.get("valid", 0) / max(samples, 1),
               accepted=int(sum(values("env/accepted_into_pool"))),
               coder_pass_rate_on_valid=mean("env/valid_pass_rate_mean"),
               time_validate_s=round(sum(values("env/time_validate_s")), 1),
               time_probe_s=round(sum(values("env/time_probe_s")), 1))
  else:
    timed = sum(values("env/num_speedups"))
    out.update(correct=counts.get("correct", 0),
               accuracy=counts.get("correct", 0) / max(samples, 1),
               gate_open_rate=mean("gate_open_rate"), mean_speed_term=mean("mean_speed_term"),
               timed_correct=int(timed),
               speedup_geomean=(float(np.exp(sum(values("env/log_speedup_sum")) / timed))
                                if timed else None))
  return out


def write_phase_summaries(workdir: str) -> list[dict[str, Any]]:
  """workdir/phases.json from metrics.jsonl: one summary per (round, phase) with records."""
  groups: dict[tuple[int, str], list[dict]] = {}
  for r in read_jsonl(os.path.join(workdir, "metrics.jsonl")):
    if "phase" in r:
      groups.setdefault((int(r["round"]), r["phase"]), []).append(r)
  order = sorted(groups, key=lambda k: (k[0], PHASES.index(k[1])))
  summaries = [_phase_summary(rnd, phase, groups[(rnd, phase)]) for rnd, phase in order]
  atomic_file.write_json(os.path.join(workdir, "phases.json"), summaries, indent=2)
  return summaries


def format_phase_summary(s: dict[str, Any]) -> str:
  """One console line per phase."""
  head = f"round {s['round']} {s['phase']}: {s['steps']} steps, {s['samples']} samples"
  statuses = ", ".join(f"{k} {v}" for k, v in s["status_counts"].items())

  def pct(x):
    return "n/a" if x is None else f"{x:.0%}"

  if s["phase"] == "proposer":
    body = (f"valid {s['valid']} ({pct(s['validity_rate'])}), accepted {s['accepted']}, "
            f"Coder pass rate on valid {pct(s['coder_pass_rate_on_valid'])}")
  else:
    speedup = "n/a" if s["speedup_geomean"] is None else f"{s['speedup_geomean']:.2f}x"
    body = (f"Coder accuracy {pct(s['accuracy'])}, gate open {pct(s['gate_open_rate'])}, "
            f"speed term {s['mean_speed_term'] or 0:.3f}, speedup geomean {speedup} over "
            f"{s['timed_correct']} timed correct kernels")
  loss = "n/a" if s["loss"] is None else f"{s['loss']:.4f}"
  return (f"{head}; {body}; pool {s['pool_size']}, frontier {s['frontier_modules']}; "
          f"reward {s['reward_mean'] or 0:.3f}, loss {loss}; statuses: {statuses}; "
          f"{s['wall_s']} s (sample {s['time_sample_s']}, score {s['time_score_s']}, "
          f"train {s['time_train_s']})")


def run(config: CoevolveConfig, workdir: str, progress: bool = True) -> dict[str, Any]:
  """Runs (or resumes) the co-evolution in `workdir`; returns the summary (also summary.json)."""
  configs.check_workdir_config(workdir, config, resumable=("num_rounds",))
  # Config errors now, not after both policies are built.
  seeds = seed_modules(config)
  cooccurrence = load_cooccurrence(config.cooccurrence, os.path.join(workdir, "cache"))
  return Coevolution(config, workdir, cooccurrence, seeds, progress).run()
