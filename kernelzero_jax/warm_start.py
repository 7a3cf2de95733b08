"""The Coder's warm start, from nothing: what `python -m experiments.warm_start` runs.

Every stage writes under the workdir and is skipped when its output is there, so a killed run
resumes where it stopped (SFT and RL also resume mid-stage from their checkpoints):

  data/        teacher pairs, sandbox-checked (teacher.make_pairs): train.jsonl from the train
               split, heldout.jsonl from the held-out split (op structures never trained on),
               their reports, every verdict as it came ({split}_verdicts.jsonl: a killed data
               stage resumes from it), heldout_problems/level1/*.py (the held-out modules whose
               teacher kernel is correct and whose reference is not degenerate, in KernelBench
               layout)
               and rl_modules/*.py (fresh train-split modules for the RL stage)
  tokenizer/   a byte-level BPE trained on the train pairs' text (at most `vocab_size` tokens)
  sft/         SFT of `policy` (random init) on train.jsonl, held-out loss on heldout.jsonl
  eval_sft/    the SFT'd policy's candidates for heldout_problems, judged by the sandbox
  probe_sft/   with probe_rl_modules > 0: the same evaluation on the first probe_rl_modules
               RL modules (probe_problems/), which RL trains on
  rl/          CA-GRPO from sft/ on rl_modules (skipped when learner.num_steps is 0)
  eval_rl/     the same held-out evaluation after RL
  probe_rl/    the RL-module probe after RL: whether RL improved what it trained on, whatever
               it did to held-out op chains
  unseen_sft/, unseen_rl/
               with num_unseen_modules > 0: the same evaluation, before and after RL, on
               data/unseen_problems: modules of the train split's op structures that neither SFT
               nor RL trained on (drawn with seed + 3, minus every train and RL module). Between
               the probe (what RL trains on) and held-out (op chains never trained on): whether
               what RL learnt carries over to new modules of known op chains.
  summary.json the numbers of every stage (each *_rl evaluation also compared problem by problem
               with its *_sft one: vs_eval_sft etc., evaluation/compare.py); warm_start.png the
               curves

`stop_after` ends the run after one stage (its output kept, the run resumable from there):
"tokenizer" makes data/ and tokenizer/ once, e.g. on a CPU, for other runs to reuse through
`data_from`.

The held-out pass rate is the share of held-out (problem, sample) pairs judged correct: pass@1
over `eval_samples` samples per problem.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import time
from typing import Any, Optional

from kernelzero_jax import atomic_file
from kernelzero_jax import configs
from kernelzero_jax.coder.prompts import PROMPT_STYLES
from kernelzero_jax.policy import PolicyConfig
from kernelzero_jax.rl.learner import LearnerConfig
from kernelzero_jax.sandbox.config import SandboxConfig
from kernelzero_jax.sft.trainer import SFTConfig
from kernelzero_jax.teacher import generator
from kernelzero_jax.teacher.family import KINDS
from kernelzero_jax.teacher.generator import kind_of

SUMMARY_FILE = "summary.json"
# Every stage, in the order run() runs them (probe_* and unseen_* only when configured).
STAGES = ("data", "tokenizer", "sft", "eval_sft", "probe_sft", "unseen_sft", "rl", "eval_rl",
          "probe_rl", "unseen_rl")


@dataclasses.dataclass(frozen=True)
class WarmStartConfig:
  seed: int = 0                  # module draws; SFT and RL have their own seeds below
  backend: str = "triton"
  size: str = "small"            # module sizes (teacher.generator.SIZES); small: CPU friendly
  # At most this many operations per module (teacher.generator.num_ops), in every split and
  # draw; None: chains of any length. Short chains make short kernels, which a tiny policy
  # learns in minutes on a CPU.
  max_ops: Optional[int] = None
  num_train_modules: int = 400
  num_heldout_modules: int = 64
  num_rl_modules: int = 64
  prompt_style: str = "compact"  # coder.prompts.PROMPT_STYLES
  comments: bool = False         # keep the teacher's comments in the SFT targets
  vocab_size: int = 2048         # at most; must not exceed the policy's vocabulary
  policy: PolicyConfig = PolicyConfig(preset="coder-tiny")
  sft: SFTConfig = SFTConfig()
  # Held-out evaluation: samples per problem, sampling temperature (0: greedy), length cap.
  eval_samples: int = 1
  eval_temperature: float = 0.0
  eval_max_new_tokens: int = 1024
  # RL modules (the first this many, by name) also evaluated before and after RL, like the
  # held-out problems: the pass rate on what RL trains on. 0: no probe.
  probe_rl_modules: int = 0
  # Modules of trained op structures never trained on, evaluated before and after RL like the
  # held-out problems (unseen_sft, unseen_rl). 0: none.
  num_unseen_modules: int = 0
  learner: LearnerConfig = LearnerConfig()
  sandbox: SandboxConfig = dataclasses.field(default_factory=SandboxConfig)
  max_parallel: int = 0          # concurrent sandbox judges; 0: one per CPU core
  # The workdir of an earlier warm start whose data/ and tokenizer/ this one reuses (e.g. a
  # larger policy on the same pairs); its data fields (DATA_FIELDS) must equal these.
  data_from: Optional[str] = None
  # The last stage to run (one of STAGES): e.g. "tokenizer" makes the data once on a CPU for
  # GPU runs to reuse through data_from. "": every stage.
  stop_after: str = ""

  def __post_init__(self):
    if self.prompt_style not in PROMPT_STYLES:
      raise ValueError(f"prompt_style must be one of {PROMPT_STYLES}, got {self.prompt_style!r}")
    if self.policy.model_dir is not None or self.policy.tokenizer_dir is not None:
      raise ValueError("the warm start builds its policy from a preset and trains its own "
                       "tokenizer: leave policy.model_dir and policy.tokenizer_dir unset")
    if min(self.num_train_modules, self.num_heldout_modules, self.eval_samples) < 1:
      raise ValueError("num_train_modules, num_heldout_modules and eval_samples must be >= 1")
    if self.max_ops is not None and self.max_ops < 1:
      raise ValueError(f"max_ops must be >= 1 or None, got {self.max_ops}")
    if self.num_unseen_modules < 0:
      raise ValueError(f"num_unseen_modules must be >= 0, got {self.num_unseen_modules}")
    if self.stop_after and self.stop_after not in STAGES:
      raise ValueError(f"stop_after must be one of {STAGES} (or empty), got {self.stop_after!r}")
    skipped = {"probe": self.probe_rl_modules == 0, "unseen": self.num_unseen_modules == 0,
               "rl": self.learner.num_steps == 0}
    if any(skipped[part] for part in self.stop_after.split("_") if part in skipped):
      raise ValueError(f"stop_after={self.stop_after!r} names a stage this config does not run "
                       "(no probe, no unseen modules or no RL steps)")
    if not 0 <= self.probe_rl_modules <= self.num_rl_modules:
      raise ValueError(f"probe_rl_modules must be in [0, num_rl_modules={self.num_rl_modules}], "
                       f"got {self.probe_rl_modules}")


# The fields that decide data/ and tokenizer/ (what data_from must agree on). Not
# num_rl_modules: the RL modules are only drawn (no teacher, no sandbox), and the same seed draws
# the same first modules, so make_data draws them again when another number is asked for.
DATA_FIELDS = ("seed", "backend", "size", "max_ops", "num_train_modules",
               "num_heldout_modules", "prompt_style", "comments", "vocab_size")


def reuse_data(config: WarmStartConfig, workdir: str) -> None:
  """Copies data/ and tokenizer/ from config.data_from (once), after checking that they were
  made with the same data fields."""
  source = config.data_from
  saved = _read_json(os.path.join(source, "config.json"))
  if saved is None:
    raise configs.ConfigError(f"data_from {source} is not a warm start workdir (no config.json)")
  differ = [k for k in DATA_FIELDS if saved.get(k) != getattr(config, k)]
  if differ:
    raise configs.ConfigError(f"data_from {source} was made with other data fields: {differ}")
  done = _read_json(os.path.join(source, SUMMARY_FILE)) or {}
  if "tokenizer" not in done:
    raise configs.ConfigError(f"data_from {source} has not finished its data and tokenizer")
  for name in ("data", "tokenizer"):
    if not os.path.isdir(os.path.join(workdir, name)):
      tmp = os.path.join(workdir, name + ".tmp")
      shutil.rmtree(tmp, ignore_errors=True)  # half a copy from a killed run
      shutil.copytree(os.path.join(source, name), tmp)
      os.replace(tmp, os.path.join(workdir, name))


class _StopAfter(Exception):
  """Raised once the stage named by config.stop_after is done."""


# The stages that evaluate the policy after RL: redone when more RL steps are asked for.
_AFTER_RL = ("eval_rl", "probe_rl", "unseen_rl")


def _paths(workdir: str) -> dict[str, str]:
  names = ("data", "tokenizer", "sft", "eval_sft", "probe_sft", "rl", "eval_rl", "probe_rl",
           "probe_problems", "unseen_sft", "unseen_rl")
  return {n: os.path.join(workdir, n) for n in names}


def _write_json(path: str, obj: Any) -> None:
  atomic_file.write_json(path, obj, indent=2, default=str)


def _read_json(path: str) -> Optional[Any]:
  if not os.path.exists(path):
    return None
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def draw_modules(config: WarmStartConfig, num: int, seed: int, split: str = "train"
                 ) -> list[tuple[str, str, Any]]:
  """`num` modules of `split` as (name, source, spec), drawn with `seed` at the config's size
  and operation bound: every draw of the warm start (train, held-out, RL, unseen) goes here."""
  return generator.generate_modules(num, seed, split=split, size=config.size,
                                    max_ops=config.max_ops)


def make_data(config: WarmStartConfig, data_dir: str, progress: bool = True) -> dict[str, Any]:
  """The data stage; returns {split: report} (each written as data/{split}_report.json)."""
  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.teacher.pairs import make_pairs, write_jsonl
  os.makedirs(data_dir, exist_ok=True)
  reports = {}
  draws = {"train": (config.num_train_modules, config.seed),
           "heldout": (config.num_heldout_modules, config.seed + 1)}
  for split, (num, seed) in draws.items():
    report_path = os.path.join(data_dir, f"{split}_report.json")
    report = _read_json(report_path)
    if report is None:
      modules = draw_modules(config, num, seed, split)
      pairs, report = make_pairs(modules, config.backend, config.sandbox,
                                 max_parallel=config.max_parallel or None,
                                 prompt_style=config.prompt_style, comments=config.comments,
                                 progress=progress,
                                 journal=os.path.join(data_dir, f"{split}_verdicts.jsonl"))
      write_jsonl(pairs, os.path.join(data_dir, f"{split}.jsonl"))
      if split == "heldout":
        # Only modules the teacher solves and whose outputs can tell a right kernel from a
        # wrong one: the policy's held-out pass rate is then a share of solvable problems.
        usable = {p["meta"]["name"] for p in pairs if not p["meta"]["degenerate"]}
        level_dir = os.path.join(data_dir, "heldout_problems", "level1")
        os.makedirs(level_dir, exist_ok=True)
        for i, (name, source, _) in enumerate(m for m in modules if m[0] in usable):
          with open(os.path.join(level_dir, f"{i + 1}_{name}.py"), "w", encoding="utf-8") as f:
            f.write(source)
        report["num_problems"] = len(usable)
      report.update(split=split, seed=seed)
      _write_json(report_path, report)  # last: its presence marks the split done
    reports[split] = report
  rl_dir = os.path.join(data_dir, "rl_modules")
  have = len(os.listdir(rl_dir)) if os.path.isdir(rl_dir) else 0
  if config.num_rl_modules and have != config.num_rl_modules:  # none yet, or data_from's number
    modules = draw_modules(config, config.num_rl_modules, config.seed + 2)
    _replace_with_sources(rl_dir, [(f"{name}.py", source) for name, source, _ in modules])
  return reports


def _replace_with_sources(directory: str, files: list[tuple[str, str]]) -> None:
  """Replaces `directory` with one holding `files` ((relative path, text) pairs), written
  beside it first, so a killed run leaves the old directory or the new one, never half."""
  tmp = directory + ".tmp"
  shutil.rmtree(tmp, ignore_errors=True)
  os.makedirs(tmp)
  for relative, text in files:
    path = os.path.join(tmp, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
      f.write(text)
  shutil.rmtree(directory, ignore_errors=True)
  os.replace(tmp, directory)


def make_tokenizer(config: WarmStartConfig, data_dir: str, out_dir: str) -> int:
  """Trains the tokenizer on the train pairs' prompts and completions; returns its size."""
  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.assets import make_tiny_tokenizer
  from kernelzero_jax.model.config import PRESETS
  from kernelzero_jax.sft.data import read_pairs
  from kernelzero_jax.tokenizer import load_tokenizer
  if os.path.exists(os.path.join(out_dir, "tokenizer_config.json")):
    return len(load_tokenizer(out_dir))
  model_vocab = PRESETS[config.policy.preset].vocab_size
  if config.vocab_size > model_vocab:
    raise configs.ConfigError(f"vocab_size {config.vocab_size} exceeds the vocabulary of preset "
                              f"{config.policy.preset!r} ({model_vocab})")
  texts = []
  for pair in read_pairs(os.path.join(data_dir, "train.jsonl")):
    texts.extend(m["content"] for m in pair.get("messages", ()))
    texts.append(pair.get("prompt", ""))
    texts.append(pair["completion"])
  tmp = out_dir + ".tmp"
  size = make_tiny_tokenizer.write(tmp, texts, config.vocab_size, exact_size=False)
  os.replace(tmp, out_dir)
  return size


def _policy(config: WarmStartConfig, paths: dict[str, str], init_from: Optional[str]
            ) -> PolicyConfig:
  return dataclasses.replace(config.policy, tokenizer_dir=paths["tokenizer"], init_from=init_from)


def write_probe_problems(config: WarmStartConfig, paths: dict[str, str]) -> str:
  """The first `probe_rl_modules` RL modules (by file name) in KernelBench layout; returns the
  directory. Unlike the held-out problems they are not checked by the teacher first: a
  degenerate one is flagged by the evaluation's report as any KernelBench problem is."""
  out = paths["probe_problems"]
  if not os.path.isdir(out):
    names = sorted(os.listdir(os.path.join(paths["data"], "rl_modules")))
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.join(tmp, "level1"))
    for i, name in enumerate(names[:config.probe_rl_modules]):
      shutil.copy(os.path.join(paths["data"], "rl_modules", name),
                  os.path.join(tmp, "level1", f"{i + 1}_{name}"))
    os.replace(tmp, out)
  return out


def write_unseen_problems(config: WarmStartConfig, data_dir: str) -> str:
  """data/unseen_problems/level1/*.py: `num_unseen_modules` train-split modules drawn with
  seed + 3, none of which is among the train modules (seed) or the RL modules (seed + 2), in
  KernelBench layout; returns the directory (drawn again when another number is asked for)."""
  out = os.path.join(data_dir, "unseen_problems")
  level = os.path.join(out, "level1")
  if os.path.isdir(level) and len(os.listdir(level)) == config.num_unseen_modules:
    return out
  draw = lambda n, seed: draw_modules(config, n, seed)
  trained = {spec for _, _, spec in draw(config.num_train_modules, config.seed)}
  trained |= {spec for _, _, spec in draw(config.num_rl_modules, config.seed + 2)}
  wanted, num = config.num_unseen_modules, config.num_unseen_modules
  while True:  # a larger draw of one seed starts with the smaller one
    unseen = [m for m in draw(num, config.seed + 3) if m[2] not in trained]
    if len(unseen) >= wanted:
      break
    num += wanted - len(unseen)
  _replace_with_sources(out, [(os.path.join("level1", f"{i + 1}_unseen_{spec.kind}.py"), source)
                              for i, (_, source, spec) in enumerate(unseen[:wanted])])
  return out


def evaluate_heldout(config: WarmStartConfig, paths: dict[str, str], policy_workdir: str,
                     out_dir: str, progress: bool = True,
                     problems_dir: Optional[str] = None) -> dict[str, Any]:
  """The held-out pass rate of the policy in `policy_workdir` (its latest checkpoint); or its
  pass rate on the KernelBench-layout `problems_dir`, sampled and judged the same way."""
  # pylint: disable-next=import-outside-toplevel
  from kernelzero_jax.evaluation.driver import EvalConfig, run_eval
  summary = run_eval(EvalConfig(
      workdir=out_dir,
      kernelbench_dir=problems_dir or os.path.join(paths["data"], "heldout_problems"),
      levels=(1,), backend=config.backend, num_samples=config.eval_samples,
      policy_checkpoint=policy_workdir, preset=config.policy.preset,
      tokenizer_dir=paths["tokenizer"], temperature=config.eval_temperature,
      max_new_tokens=config.eval_max_new_tokens, seed=config.seed,
      prompt_style=config.prompt_style, sandbox=config.sandbox,
      max_parallel=config.max_parallel, progress=progress))
  every = summary["levels"]["all"]
  return {"pass_rate": every["num_correct"] / max(every["num_samples"], 1),
          "num_correct": every["num_correct"], "num_problems": every["num_problems"],
          "num_samples": every["num_samples"], "pass_at_k": every["pass_at_k"],
          "status_counts": every["status"]["counts"],
          "by_kind": _correct_by_kind(out_dir)}


def _correct_by_kind(eval_dir: str) -> dict[str, dict[str, Any]]:
  """{kind: {"total", "correct", "pass_rate"}} (the data stage's layout) over the family's
  kinds, read off the problem names (every problem file the warm start writes ends in
  _<kind>.py): where a pass rate moved is the first thing a run's reader asks."""
  # pylint: disable-next=import-outside-toplevel
  from kernelzero_jax.evaluation.driver import read_verdicts
  by_kind: dict[str, dict[str, Any]] = {}
  for verdict in read_verdicts(eval_dir):
    kind = kind_of(verdict["problem"])
    if kind in KINDS:
      counts = by_kind.setdefault(kind, {"total": 0, "correct": 0})
      counts["total"] += 1
      counts["correct"] += int(bool(verdict["correct"]))
  return {k: dict(c, pass_rate=c["correct"] / c["total"]) for k, c in sorted(by_kind.items())}


def run(config: WarmStartConfig, workdir: str, progress: bool = True) -> dict[str, Any]:
  """Runs (or resumes) every stage in `workdir`; returns the summary (also summary.json)."""
  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.coder.train import CoderRunConfig
  from kernelzero_jax.coder.train import train as train_coder
  from kernelzero_jax.evaluation.compare import compare, read_eval
  from kernelzero_jax.sft.run import SFTRunConfig
  from kernelzero_jax.sft.run import train as train_sft
  # More RL steps may be asked of a finished run (the RL stage resumes from its checkpoint and
  # the held-out evaluation after it is redone), and micro-batching may change (memory only);
  # anything else is another experiment.
  configs.check_workdir_config(workdir, config, resumable=(
      "learner.num_steps", "learner.num_micro_batches", "sft.num_micro_batches", "stop_after"))
  paths = _paths(workdir)
  summary_path = os.path.join(workdir, SUMMARY_FILE)
  summary = _read_json(summary_path) or {}
  times = summary.setdefault("wall_s", {})
  if summary.get("rl", {}).get("num_steps", config.learner.num_steps) != config.learner.num_steps:
    for key in ("rl", *_AFTER_RL):
      summary.pop(key, None)
      times.pop(key, None)
    for key in _AFTER_RL:  # their verdicts are the old policy's
      shutil.rmtree(paths[key], ignore_errors=True)

  def stage(name, fn):
    if name not in summary:
      logging.info("warm start: %s", name)
      t0 = time.perf_counter()
      summary[name] = fn()
      times[name] = round(time.perf_counter() - t0, 1)
      _write_json(summary_path, summary)
    if name == config.stop_after:
      raise _StopAfter
    return summary[name]

  def stages():
    if config.data_from is not None:
      reuse_data(config, workdir)  # the stages below then find their outputs and only read them
    data = stage("data", lambda: {
        split: {k: r[k] for k in ("num_modules", "num_pairs", "pass_rate", "by_kind", "statuses",
                                  "num_problems") if k in r}
        for split, r in make_data(config, paths["data"], progress).items()})
    if data["heldout"].get("num_problems", 0) == 0:
      raise RuntimeError("no usable held-out problem: the teacher solved none of the held-out "
                         f"modules (see {paths['data']}/heldout_report.json)")
    stage("tokenizer", lambda: {"vocab_size": make_tokenizer(config, paths["data"],
                                                              paths["tokenizer"])})
    sft_config = SFTRunConfig(policy=_policy(config, paths, None), sft=config.sft,
                              train_data=os.path.join(paths["data"], "train.jsonl"),
                              heldout_data=os.path.join(paths["data"], "heldout.jsonl"))
    stage("sft", lambda: _last_metrics(train_sft(sft_config, paths["sft"], progress=progress),
                                       ("loss", "heldout_loss", "epoch")))

    def evaluation(name, policy_dir, problems_dir=None, before=None):
      """Stage `name` (also its output directory): policy_dir's pass rate on problems_dir (None:
      the held-out problems); with `before` (an earlier evaluation stage of the same problems),
      also the problem-by-problem comparison with it (evaluation.compare)."""
      def run_it():
        result = evaluate_heldout(config, paths, policy_dir, paths[name], progress,
                                  problems_dir=problems_dir)
        if before is not None:
          result[f"vs_{before}"] = compare(read_eval(paths[before]), read_eval(paths[name]),
                                           group_of=kind_of)
        return result
      stage(name, run_it)

    probe = write_probe_problems(config, paths) if config.probe_rl_modules else None
    unseen = (write_unseen_problems(config, paths["data"]) if config.num_unseen_modules
              else None)
    # (stage prefix, problems): held-out, then the optional probe and unseen modules.
    evaluations = [("eval", None)] + [(prefix, problems_dir) for prefix, problems_dir in
                                      (("probe", probe), ("unseen", unseen)) if problems_dir]
    for prefix, problems_dir in evaluations:
      evaluation(f"{prefix}_sft", paths["sft"], problems_dir)
    if config.learner.num_steps > 0:
      rl_config = CoderRunConfig(policy=_policy(config, paths, paths["sft"]),
                                 learner=config.learner, backend=config.backend,
                                 modules=(os.path.join(paths["data"], "rl_modules"),),
                                 prompt_style=config.prompt_style, sandbox=config.sandbox,
                                 max_parallel=config.max_parallel)
      stage("rl", lambda: dict(
          _last_metrics(train_coder(rl_config, paths["rl"], progress=progress),
                        ("accuracy", "reward_mean")), num_steps=config.learner.num_steps))
      for prefix, problems_dir in evaluations:
        evaluation(f"{prefix}_rl", paths["rl"], problems_dir, before=f"{prefix}_sft")

  try:
    stages()
  except _StopAfter:  # config.stop_after is done: no plot of stages not run
    return summary
  summary["plot"] = plot_curves(workdir, summary, os.path.join(workdir, "warm_start.png"))
  _write_json(summary_path, summary)
  return summary


def _last_metrics(metrics: Optional[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, Any]:
  metrics = metrics or {}
  return {k: metrics[k] for k in keys if k in metrics}


def plot_curves(workdir: str, summary: dict[str, Any], path: str) -> str:
  """warm_start.png: SFT train and held-out loss; RL reward and accuracy per step, with the
  held-out pass rate before and after RL. Returns `path`."""
  # pylint: disable=import-outside-toplevel
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  from kernelzero_jax.metrics import read_jsonl
  paths = _paths(workdir)
  sft = read_jsonl(os.path.join(paths["sft"], "metrics.jsonl"))
  rl = read_jsonl(os.path.join(paths["rl"], "metrics.jsonl"))
  fig, (ax_sft, ax_rl) = plt.subplots(1, 2, figsize=(11, 4))
  train = [(m["step"], m["loss"]) for m in sft if "loss" in m]
  heldout = [(m["step"], m["heldout_loss"]) for m in sft if m.get("heldout_loss") is not None]
  for points, label in ((train, "train loss"), (heldout, "held-out loss")):
    if points:
      ax_sft.plot(*zip(*points), marker="." if label.startswith("held") else None, label=label)
  ax_sft.set(xlabel="SFT step", ylabel="cross-entropy (nats / token)", yscale="log",
             title="SFT on teacher pairs")
  ax_sft.legend()
  steps = [m["step"] for m in rl if "reward_mean" in m]
  if steps:
    ax_rl.plot(steps, [m["reward_mean"] for m in rl if "reward_mean" in m], marker=".",
               label="reward (mean)")
    ax_rl.plot(steps, [m["accuracy"] for m in rl if "reward_mean" in m], marker=".",
               label="accuracy on RL modules")
  for key, style, color, label in (
      ("eval_sft", "--", "gray", "held-out pass rate, SFT"),
      ("eval_rl", "-", "black", "held-out pass rate, after RL"),
      ("probe_sft", "--", "tab:green", "RL-module probe, SFT"),
      ("probe_rl", "-", "tab:green", "RL-module probe, after RL"),
      ("unseen_sft", "--", "tab:purple", "unseen modules, SFT"),
      ("unseen_rl", "-", "tab:purple", "unseen modules, after RL")):
    if key in summary:
      ax_rl.axhline(summary[key]["pass_rate"], linestyle=style, color=color,
                    label=f"{label}: {summary[key]['pass_rate']:.1%}")
  ax_rl.set(xlabel="CA-GRPO step", ylim=(0, None), title="CA-GRPO from the SFT checkpoint")
  ax_rl.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)
  return path
