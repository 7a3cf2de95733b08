"""Sandbox-checked SFT pairs from the teacher: (Coder prompt, teacher's ModelNew) for every module
whose teacher candidate the sandbox judges `correct`.

A pair is one JSON object (a line of the JSONL file):
  {"messages": coder_messages(reference, backend, prompt_style),  # [system, user]
   "completion": "```python\\n<ModelNew source>\\n```",
   "meta": {"name", "kind", "structure", "status", "speedup", "degenerate"}}
The completion is fenced the way the Coder's prompt asks for its answer, so the SFT target is
exactly what coder.extract_code reads back. Modules whose candidate fails are left out and listed,
with the sandbox's reasons, in the report.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
from typing import Any, Sequence

from kernelzero_jax import atomic_file
from kernelzero_jax.coder.prompts import coder_messages
from kernelzero_jax.sandbox import verdict as V
from kernelzero_jax.sandbox.config import SandboxConfig
from kernelzero_jax.sandbox.evaluate import Job, SandboxPool, cuda_visible
from kernelzero_jax.teacher import generator
from kernelzero_jax.teacher.family import ModuleSpec
from kernelzero_jax.teacher.parse import NotInFamily, understand
from kernelzero_jax.teacher.teach import write

# (name, reference source, spec or None: understood from the source)
Module = tuple[str, str, ModuleSpec | None]


def completion_text(candidate_source: str) -> str:
  body = candidate_source if candidate_source.endswith("\n") else candidate_source + "\n"
  return f"```python\n{body}```"


def _journal_key(name: str, reference: str, candidate: str, config: SandboxConfig) -> str:
  text = json.dumps([name, reference, candidate, config.to_dict()], sort_keys=True)
  return hashlib.sha256(text.encode()).hexdigest()


def _read_journal(path: str | None) -> dict[str, V.Verdict]:
  """key -> verdict from a journal of an earlier, interrupted call (unreadable lines skipped:
  the last one may be half written)."""
  out: dict[str, V.Verdict] = {}
  if path is None or not os.path.exists(path):
    return out
  with open(path, encoding="utf-8") as f:
    for line in f:
      try:
        entry = json.loads(line)
        out[entry["key"]] = V.Verdict.from_dict(entry["verdict"])
      except (ValueError, KeyError, TypeError):
        continue
  return out


def make_pairs(modules: Sequence[Module], backend: str, sandbox_config: SandboxConfig,
               max_parallel: int | None = None, prompt_style: str = "zero_shot",
               comments: bool = True, progress: bool = True, journal: str | None = None
               ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
  """Judges the teacher's candidate for every module; returns (pairs, report).

  The report holds the pass rate overall and by kind, the count of each status, the degenerate
  references among the passes, and every failure with its reasons.

  With `journal` (a JSONL path), every verdict is appended there as soon as it exists, and
  verdicts already there for the same module, candidate and sandbox settings are reused: a
  killed call loses no finished judgement.
  """
  jobs, entries, failures = [], [], []
  for name, source, spec in modules:
    try:
      spec = spec if spec is not None else understand(source)
      candidate = write(spec, backend, comments)
    except NotInFamily as e:
      failures.append({"name": name, "kind": None, "status": "not_in_family",
                       "reasons": [e.reason]})
      continue
    jobs.append(Job(source, candidate, backend, name))
    entries.append((name, source, spec, candidate))
  keys = [_journal_key(j.name, j.reference_source, j.candidate_source, sandbox_config)
          for j in jobs]
  done = _read_journal(journal)
  todo = [i for i, k in enumerate(keys) if k not in done]
  verdicts: list[V.Verdict | None] = [done.get(k) for k in keys]
  log = open(journal, "a+", encoding="utf-8") if journal else None  # pylint: disable=consider-using-with
  if log is not None and log.tell() > 0:
    log.seek(log.tell() - 1)
    if log.read(1) != "\n":
      log.write("\n")  # end a line a killed call left half written

  def record(i: int, _job: Job, verdict: V.Verdict) -> None:
    if log is not None:
      log.write(json.dumps({"key": keys[todo[i]], "name": jobs[todo[i]].name,
                            "verdict": verdict.to_dict()}, default=repr) + "\n")
      log.flush()

  try:
    with SandboxPool(sandbox_config, max_parallel=max_parallel) as pool:
      fresh = pool.evaluate([jobs[i] for i in todo], progress=progress, on_result=record)
  finally:
    if log is not None:
      log.close()
  for i, verdict in zip(todo, fresh):
    verdicts[i] = verdict
  pairs = []
  by_kind: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
  statuses: collections.Counter = collections.Counter(f["status"] for f in failures)
  degenerate = []
  for (name, source, spec, candidate), verdict in zip(entries, verdicts):
    by_kind[spec.kind]["total"] += 1
    statuses[verdict.status] += 1
    if not verdict.correct:
      failures.append({"name": name, "kind": spec.kind, "structure": spec.describe(),
                       "status": verdict.status, "reasons": list(verdict.reasons[:3])})
      continue
    by_kind[spec.kind]["correct"] += 1
    if verdict.degenerate:
      degenerate.append({"name": name, "flags": list(verdict.degenerate)})
    pairs.append({
        "messages": coder_messages(source, backend, prompt_style),
        "completion": completion_text(candidate),
        "meta": {"name": name, "kind": spec.kind, "structure": spec.describe(),
                 "status": verdict.status, "speedup": verdict.speedup,
                 # A degenerate reference cannot tell a wrong kernel from a right one (e.g. a
                 # softmax over a long row is all below atol): filter on it for evaluation.
                 "degenerate": list(verdict.degenerate)},
    })
  total = len(modules)
  report = {
      "backend": backend, "device": sandbox_config.device, "num_modules": total,
      "num_pairs": len(pairs), "pass_rate": len(pairs) / total if total else 0.0,
      "by_kind": {k: {"total": c["total"], "correct": c["correct"],
                      "pass_rate": c["correct"] / c["total"]} for k, c in sorted(by_kind.items())},
      "statuses": dict(sorted(statuses.items())),
      "degenerate": degenerate,
      "failures": failures,
  }
  return pairs, report


def write_jsonl(pairs: Sequence[dict[str, Any]], path: str) -> None:
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  atomic_file.write_jsonl(path, pairs)


def make_teacher_data(num_modules: int, seed: int, split: str, backend: str, device: str | None,
                      size: str, prompt_style: str, out: str, comments: bool = True,
                      max_parallel: int | None = None, timing: bool = True,
                      progress: bool = True) -> dict[str, Any]:
  """Generates modules, keeps the teacher's sandbox-correct candidates as pairs, writes them to
  `out` (JSONL) and returns the report (what experiments.make_teacher_data prints)."""
  modules = generator.generate_modules(num_modules, seed, split=split, size=size)
  config = SandboxConfig(device=device or ("cuda" if cuda_visible() else "cpu"), timing=timing)
  pairs, report = make_pairs(modules, backend, config, max_parallel=max_parallel,
                             prompt_style=prompt_style, comments=comments, progress=progress)
  write_jsonl(pairs, out)
  report.update({"split": split, "seed": seed, "size": size, "prompt_style": prompt_style,
                 "comments": comments, "out": out})
  return report
