"""SFT pairs for the Proposer's warm start: the teacher's modules as answers to API-set prompts.

The teacher's module generator writes KernelBench-format modules of its family (elementwise
chains, reductions, softmax, matmul with an epilogue). Each one answers the Proposer prompt for
the catalog APIs its forward really computes with (`catalog.forward_apis`), so a pair teaches
the format and the composition of given APIs, and nothing the Proposer would be rejected for:
every pair passes `read_proposal`, the Proposer's own static reading, before it is written.

    python -m experiments.make_proposer_pairs --out=DIR --num_train=2000 --num_heldout=64

writes DIR/train.jsonl and DIR/heldout.jsonl (held-out-split modules) in the format
`experiments.train_sft` reads, and DIR/apis.json: the APIs the pairs use, the vocabulary a
Proposer trained on them is asked about (`CoevolveConfig.apis`).
"""

from __future__ import annotations

import json
import os
from typing import Any

from kernelzero_jax import atomic_file
from kernelzero_jax.coder.prompts import fenced
from kernelzero_jax.proposer import catalog
from kernelzero_jax.proposer.prompts import proposer_messages, read_proposal
from kernelzero_jax.teacher.generator import generate_modules


def proposer_pairs(n: int, seed: int, split: str) -> tuple[list[dict[str, Any]], dict[str, int]]:
  """Up to `n` pairs from `n` generated modules of `split`, and why the others were skipped."""
  pairs, skipped = [], {}
  for name, source, _ in generate_modules(n, seed=seed, split=split, size="small"):
    apis = sorted(catalog.forward_apis(source))
    completion = fenced(source)
    reason = None
    if not apis:
      reason = "uses no catalog API"
    else:
      proposal = read_proposal(completion, apis)
      reason = None if proposal.ok else proposal.rejection
    if reason:
      skipped[reason] = skipped.get(reason, 0) + 1
      continue
    pairs.append({"messages": proposer_messages(apis), "completion": completion,
                  "meta": {"name": name, "apis": apis}})
  return pairs, skipped


def write_pairs(out_dir: str, num_train: int, num_heldout: int, seed: int = 0) -> dict[str, Any]:
  """train.jsonl, heldout.jsonl and apis.json in `out_dir`; returns a report."""
  os.makedirs(out_dir, exist_ok=True)
  report: dict[str, Any] = {}
  used: set[str] = set()
  for split, n, name in (("train", num_train, "train"), ("heldout", num_heldout, "heldout")):
    pairs, skipped = proposer_pairs(n, seed, split)
    path = os.path.join(out_dir, f"{name}.jsonl")
    atomic_file.write_jsonl(path, pairs)
    used.update(a for p in pairs for a in p["meta"]["apis"])
    report[split] = {"pairs": len(pairs), "skipped": skipped}
  report["apis"] = sorted(used)
  with open(os.path.join(out_dir, "apis.json"), "w", encoding="utf-8") as f:
    json.dump(report["apis"], f)
  return report
