"""SFT pairs for the Proposer's warm start: every pair is one the Proposer's reading accepts."""

from __future__ import annotations

import json

from kernelzero_jax.proposer import catalog
from kernelzero_jax.proposer.prompts import read_proposal
from kernelzero_jax.proposer.teacher_pairs import proposer_pairs, write_pairs
from kernelzero_jax.sft.data import read_pairs


def test_each_pair_answers_its_api_prompt_with_a_module_that_uses_every_api():
  pairs, skipped = proposer_pairs(40, seed=3, split="train")
  assert len(pairs) + sum(skipped.values()) == 40 and len(pairs) >= 30
  assert set(skipped) <= {"uses no catalog API"}
  for p in pairs:
    apis = p["meta"]["apis"]
    user = p["messages"][1]["content"]
    assert all(f"- {a} (" in user for a in apis)
    proposal = read_proposal(p["completion"], apis)
    assert proposal.ok and proposal.apis_used == frozenset(apis)
    assert set(apis) == catalog.forward_apis(proposal.source)


def test_written_pairs_are_sft_data_and_name_their_vocabulary(tmp_path):
  report = write_pairs(str(tmp_path), num_train=12, num_heldout=4, seed=0)
  train, heldout = read_pairs(str(tmp_path / "train.jsonl")), read_pairs(str(tmp_path /
                                                                             "heldout.jsonl"))
  assert len(train) == report["train"]["pairs"] and len(heldout) == report["heldout"]["pairs"]
  assert all(p["meta"]["name"].startswith("train_") for p in train)
  assert all(p["meta"]["name"].startswith("heldout_") for p in heldout)
  vocabulary = json.load(open(tmp_path / "apis.json"))
  assert vocabulary == report["apis"] == sorted({a for p in train + heldout
                                                 for a in p["meta"]["apis"]})
