"""The order in which a pool starts its jobs (SandboxConfig.job_order; SandboxPool.evaluate).

A batch comes grouped: an RL step's completions prompt by prompt, a benchmark's copies problem by
problem. Judges of one reference then run side by side and wait for the same things: a place for
their weights in the GPU's ledger (level 2 problem 59's judges keep 8 GiB each, one or two at a
time), their reference built on the CPU (5-11 s each for problem 59). In the batch of 259 the 9
copies of problem 59 started together near the end, their judges' reference step took up to 71 s
on an H100 and 77 s on an H200, and batches ended on them, the GPU idle for most of their last
15 s (BENCHMARKS.md, "Judges started ahead"). `spread` places each reference's jobs evenly over the
whole batch; verdicts come back in the caller's order either way.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Callable, Hashable, Sequence


def given(keys: Sequence[Hashable]) -> list[int]:
  """The jobs in the order they came."""
  return list(range(len(keys)))


def spread(keys: Sequence[Hashable]) -> list[int]:
  """Indices of `keys` such that the items of each key sit evenly over the whole order: the
  m-th of a key's n items at the fraction (m + 1/2) / n of the way, ties in the order the keys
  first came, each key's items in their own order. A key with one item comes in the middle."""
  groups: dict[Hashable, list[int]] = {}
  for i, key in enumerate(keys):
    groups.setdefault(key, []).append(i)
  placed = [(Fraction(2 * m + 1, 2 * len(items)), rank, i)
            for rank, items in enumerate(groups.values()) for m, i in enumerate(items)]
  return [i for _, _, i in sorted(placed)]


JOB_ORDERS: dict[str, Callable[[Sequence[Hashable]], list[int]]] = {"given": given,
                                                                     "spread": spread}


def order(name: str, keys: Sequence[Hashable]) -> list[int]:
  """The start order JOB_ORDERS[name] gives jobs with these keys (one per job: what makes two
  jobs alike, their reference): a permutation of range(len(keys))."""
  if name not in JOB_ORDERS:
    raise ValueError(f"unknown job order {name!r}; known: {sorted(JOB_ORDERS)}")
  return JOB_ORDERS[name](keys)
