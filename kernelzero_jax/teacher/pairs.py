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
import json
import os
from typing import Any, Sequence

from kernelzero_jax.coder.prompts import coder_messages
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


def make_pairs(modules: Sequence[Module], backend: str, sandbox_config: SandboxConfig,
               max_parallel: int | None = None, prompt_style: str = "zero_shot",
               comments: bool = True, progress: bool = True
               ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
  """Judges the teacher's candidate for every module; returns (pairs, report).

  The report holds the pass rate overall and by kind, the count of each status, the degenerate
  references among the passes, and every failure with its reasons.
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
  verdicts = SandboxPool(sandbox_config, max_parallel=max_parallel).evaluate(jobs,
                                                                             progress=progress)
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
  tmp = path + ".tmp"
  with open(tmp, "w", encoding="utf-8") as f:
    for p in pairs:
      f.write(json.dumps(p) + "\n")
  os.replace(tmp, path)  # a reader never sees half a file


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
