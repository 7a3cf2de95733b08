"""The KernelBench evaluation: what `python -m experiments.eval_kernelbench` runs.

  1. Problems of the requested levels from the KernelBench directory (a file that does not load
     is reported and skipped).
  2. Candidates: from --samples_dir (see samples.py for the file layout), or sampled from a
     policy (a Hugging Face checkpoint, or our Orbax checkpoint on top of an architecture) with
     the Coder's one-shot prompt; completions are saved under workdir/samples/ first.
  3. Every (problem, sample) is judged by the sandbox; each verdict is appended to
     workdir/verdicts.jsonl as soon as it exists. A rerun skips what is there, so a crash loses
     at most the candidates in flight.
  4. Metrics (metrics.summarize) and the report (report.write_report) in the workdir.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import Any, Optional, Sequence

from kernelzero_jax.evaluation import samples as samples_lib
from kernelzero_jax.metrics import read_jsonl
from kernelzero_jax.sandbox import verdict as V
from kernelzero_jax.sandbox.config import SandboxConfig
from kernelzero_jax.sandbox.evaluate import Job, SandboxPool
from kernelzero_jax.tasks.kernelbench import Task, scan_tasks

VERDICTS_FILE = "verdicts.jsonl"


@dataclasses.dataclass(frozen=True)
class EvalConfig:
  workdir: str
  kernelbench_dir: Optional[str] = None
  levels: tuple[int, ...] = (1, 2)
  # A subset of problems (empty: all): "19" is problem 19 of every level, "2/12" problem 12 of
  # level 2 only.
  problem_ids: tuple[str, ...] = ()
  backend: str = "cuda"
  num_samples: int = 1
  # Candidates: exactly one of samples_dir, model_dir / policy_checkpoint, teacher.
  samples_dir: Optional[str] = None
  teacher: bool = False                   # the rule-based teacher (kernelzero_jax/teacher)
  model_dir: Optional[str] = None         # a Hugging Face checkpoint
  policy_checkpoint: Optional[str] = None  # our Orbax workdir; architecture from model_dir/preset
  preset: str = "tiny"                    # architecture of policy_checkpoint without model_dir
  tokenizer_dir: Optional[str] = None
  temperature: float = 0.0
  top_p: float = 1.0
  max_new_tokens: int = 4096
  seed: int = 0
  prompt_batch: int = 8                   # problems per sampler call
  prompt_style: str = "one_shot"         # coder.prompts.PROMPT_STYLES
  sandbox: SandboxConfig = dataclasses.field(default_factory=SandboxConfig)
  max_parallel: int = 0
  progress: bool = True

  def __post_init__(self):
    sources = [x for x in (self.samples_dir, self.model_dir or self.policy_checkpoint,
                           self.teacher) if x]
    if len(sources) != 1:
      raise ValueError("give exactly one candidate source: --samples_dir, --model_dir / "
                       "--policy_checkpoint (a policy to sample from), or --teacher")
    if self.num_samples < 1:
      raise ValueError("num_samples must be >= 1")


def _record(task: Task, sample: int, verdict: V.Verdict) -> dict[str, Any]:
  return {"level": task.level, "problem": task.key, "problem_id": task.problem_id,
          "sample": sample, "status": verdict.status, "correct": verdict.correct,
          "speedup": verdict.speedup, "speedup_vs_compile": verdict.speedup_vs_compile,
          "reference_ms": verdict.reference_ms, "candidate_ms": verdict.candidate_ms,
          "degenerate": list(verdict.degenerate), "reference_error": verdict.reference_error,
          "tolerance": dict(verdict.tolerance), "reasons": list(verdict.reasons[:5])}


def read_verdicts(workdir: str) -> list[dict[str, Any]]:
  """The records of workdir/verdicts.jsonl; a torn last line (killed mid-write) is ignored."""
  return read_jsonl(os.path.join(workdir, VERDICTS_FILE))


class _VerdictLog:
  """Appends one JSON line per verdict and flushes it, so finished work survives a crash."""

  def __init__(self, workdir: str):
    path = os.path.join(workdir, VERDICTS_FILE)
    # A torn last line (no newline) from a killed run: start the next record on a new line.
    if os.path.exists(path) and os.path.getsize(path):
      with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        torn = f.read(1) != b"\n"
      if torn:
        with open(path, "a", encoding="utf-8") as f:
          f.write("\n")
    self._file = open(path, "a", encoding="utf-8")

  def write(self, record: dict[str, Any]) -> None:
    self._file.write(json.dumps(record, default=str) + "\n")
    self._file.flush()
    os.fsync(self._file.fileno())

  def close(self) -> None:
    self._file.close()


def _missing(config: EvalConfig, tasks: Sequence[Task], out_dir: str) -> list[Task]:
  existing, _ = (samples_lib.scan_samples(out_dir) if os.path.isdir(out_dir) else ({}, []))
  return [t for t in tasks
          if any((t.level, t.problem_id, s) not in existing for s in range(config.num_samples))]


def generate_samples(config: EvalConfig, tasks: Sequence[Task], out_dir: str) -> None:
  """Samples the missing completions of every task from the policy into `out_dir`."""
  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.policy import PolicyConfig, load_policy
  from kernelzero_jax.sampling import Sampler
  from kernelzero_jax.tokenizer import eos_token_ids, pad_token_id
  if not _missing(config, tasks, out_dir):
    return
  policy = PolicyConfig(model_dir=config.model_dir, preset=config.preset,
                        tokenizer_dir=config.tokenizer_dir, init_from=config.policy_checkpoint)
  model, tokenizer = load_policy(policy, "bfloat16" if config.model_dir else "float32")
  eos = eos_token_ids(tokenizer, model.config)
  write_policy_samples(config, tasks, out_dir,
                       Sampler(model, eos_ids=eos, pad_id=pad_token_id(tokenizer, eos)),
                       tokenizer)


def write_policy_samples(config: EvalConfig, tasks: Sequence[Task], out_dir: str, sampler,
                         tokenizer, state=None) -> None:
  """Samples the missing completions of every task with `sampler` (at its model's parameters, or
  `state`) into `out_dir`: how a trainer evaluates the policy it holds in memory."""
  # pylint: disable-next=import-outside-toplevel
  from kernelzero_jax.coder.prompts import coder_messages, encode_prompt
  todo = _missing(config, tasks, out_dir)
  if not todo:
    return
  bar = None
  if config.progress:
    from tqdm import tqdm  # pylint: disable=import-outside-toplevel
    bar = tqdm(total=len(todo), desc="sampling", unit="problem")
  for start in range(0, len(todo), config.prompt_batch):
    chunk = todo[start:start + config.prompt_batch]
    prompts = [encode_prompt(tokenizer, coder_messages(t.source, config.backend,
                                                       config.prompt_style)) for t in chunk]
    # One seed per chunk position, so a resumed run samples what an uninterrupted one would.
    out = sampler.sample(prompts, config.max_new_tokens, seed=config.seed + start,
                         temperature=config.temperature, top_p=config.top_p,
                         num_samples=config.num_samples, state=state)
    for i, task in enumerate(chunk):
      rows = range(i * config.num_samples, (i + 1) * config.num_samples)
      texts = [tokenizer.decode(out.tokens[r], skip_special_tokens=False) for r in rows]
      samples_lib.write_completions(out_dir, task.level, task.problem_id, 0, texts)
    if bar is not None:
      bar.update(len(chunk))
  if bar is not None:
    bar.close()


def write_teacher_samples(config: EvalConfig, tasks: Sequence[Task], out_dir: str
                          ) -> dict[str, str]:
  """The rule-based teacher as a baseline Coder: its candidate for every problem it understands
  (deterministic, so every sample index gets the same kernel). Returns {problem: why not} for
  the problems outside its family, which are judged format_error with that reason."""
  # pylint: disable-next=import-outside-toplevel
  from kernelzero_jax.teacher import NotInFamily, teach
  os.makedirs(out_dir, exist_ok=True)
  not_understood = {}
  for task in tasks:
    try:
      text = f"```python\n{teach(task.source, config.backend)}```"
    except NotInFamily as e:
      not_understood[task.key] = f"the teacher does not understand this module: {e.reason}"
      text = not_understood[task.key]
    samples_lib.write_completions(out_dir, task.level, task.problem_id, 0,
                                  [text] * config.num_samples)
  return not_understood


def select_tasks(config: EvalConfig) -> tuple[list[Task], list[str]]:
  """The problems `config` asks for, and the files that do not load (logged and skipped)."""
  tasks, broken = scan_tasks(config.kernelbench_dir, config.levels)
  for problem in broken:
    logging.warning("skipping a problem that does not load: %s", problem)
  if config.problem_ids:
    wanted = {str(p).strip() for p in config.problem_ids}
    tasks = [t for t in tasks
             if str(t.problem_id) in wanted or f"{t.level}/{t.problem_id}" in wanted]
  if not tasks:
    raise ValueError(f"no problems selected (levels {config.levels}, ids {config.problem_ids})")
  return tasks, broken


def run_eval(config: EvalConfig) -> dict[str, Any]:
  """Evaluates, resuming from config.workdir; returns the summary (also in the report)."""
  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.evaluation.metrics import summarize
  from kernelzero_jax.evaluation.report import write_report
  os.makedirs(config.workdir, exist_ok=True)
  tasks, broken = select_tasks(config)

  samples_dir = config.samples_dir
  not_understood: dict[str, str] = {}
  if samples_dir is None:
    samples_dir = os.path.join(config.workdir, "samples")
    if config.teacher:
      not_understood = write_teacher_samples(config, tasks, samples_dir)
    else:
      generate_samples(config, tasks, samples_dir)
  found, odd = samples_lib.scan_samples(samples_dir)
  if odd:
    logging.warning("%d files in %s do not follow the sample naming (e.g. %s)", len(odd),
                    samples_dir, odd[0])

  done = {(r["problem"], r["sample"]) for r in read_verdicts(config.workdir)}
  log = _VerdictLog(config.workdir)
  jobs: list[Job] = []
  job_keys: list[tuple[Task, int]] = []
  try:
    for task in tasks:
      for s in range(config.num_samples):
        if (task.key, s) in done:
          continue
        sample = found.get((task.level, task.problem_id, s))
        source, reason = ((None, f"no sample file for {task.key} sample {s} in {samples_dir}")
                          if sample is None else samples_lib.read_candidate(sample))
        if source is None:  # judged here: nothing for the sandbox to run
          reason = not_understood.get(task.key, reason)
          log.write(_record(task, s, V.Verdict(status=V.FORMAT_ERROR, backend=config.backend,
                                               reasons=[reason])))
          continue
        jobs.append(Job(reference_source=task.source, candidate_source=source,
                        backend=config.backend, name=f"{task.key}/sample_{s}"))
        job_keys.append((task, s))

    def record(i: int, job: Job, verdict: V.Verdict) -> None:
      del job
      rec = _record(*job_keys[i], verdict)
      same = verdict.evidence.get("same_candidate_as")
      if same is not None:  # an identical sample of the same problem, judged once for both
        rec["copy_of_sample"] = job_keys[same][1]
      log.write(rec)

    with SandboxPool(config.sandbox, max_parallel=config.max_parallel or None) as pool:
      pool.evaluate(jobs, progress=config.progress, on_result=record)
  finally:
    log.close()

  selected = {t.key for t in tasks}
  latest: dict[tuple[str, int], dict] = {}  # a sample judged twice (a rerun) counts once
  for r in read_verdicts(config.workdir):
    if r["problem"] in selected and r["sample"] < config.num_samples:
      latest[(r["problem"], r["sample"])] = r
  records = [latest[k] for k in sorted(latest)]
  summary = summarize(records)
  summary["skipped_problems"] = broken
  write_report(records, summary, config.workdir,
               title=f"KernelBench levels {','.join(map(str, config.levels))}, "
                     f"{config.backend}, {config.num_samples} sample(s) per problem")
  with open(os.path.join(config.workdir, "summary.json"), "w", encoding="utf-8") as f:
    json.dump(summary, f, indent=2, default=str)
  return summary
