"""Per-step metrics: one JSON line per step in workdir/metrics.jsonl, plus TensorBoard scalars.

On resume, pass the restored checkpoint step: lines of later steps (written after that checkpoint
by a run that then died) are dropped, so the file holds one consistent history.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Mapping, Optional

import numpy as np

from kernelzero_jax import atomic_file


def _to_python(v: Any) -> Any:
  if isinstance(v, (str, bool, int)) or v is None:
    return v
  a = np.asarray(v)
  if a.size == 1:
    x = a.item()
    if isinstance(x, float) and not math.isfinite(x):
      return str(x)  # JSON has no NaN / Infinity
    return x
  return a.tolist()


def read_jsonl(path: str) -> list[dict]:
  """The records of an append-only JSONL file (metrics, verdicts); a torn last line (killed
  mid-write) is ignored, and a missing file has none."""
  if not os.path.exists(path):
    return []
  records = []
  with open(path, encoding="utf-8") as f:
    for line in f:
      try:
        records.append(json.loads(line))
      except json.JSONDecodeError:
        continue
  return records


read_metrics = read_jsonl  # the records of a metrics.jsonl


def _summary_writer(logdir: str):
  """A TensorBoard event writer: tensorboardX's, else torch's (which needs the tensorboard
  package), so that an image with either runs; neither is an error that says what to install."""
  try:
    from tensorboardX import SummaryWriter  # pylint: disable=import-outside-toplevel
  except ImportError:
    try:
      from torch.utils.tensorboard import SummaryWriter  # pylint: disable=import-outside-toplevel
    except ImportError as e:
      raise ImportError("TensorBoard metrics need tensorboardX (pip install tensorboardX) or "
                        "torch with the tensorboard package") from e
  return SummaryWriter(logdir)


class StepTotals:
  """An environment's metrics of one step, added up over the step's scoring rounds (the
  learner's dynamic sampling scores a step several times); a new step starts them afresh."""

  def __init__(self):
    self.step: int | None = None  # the step `values` add up, None before any
    self.values: dict[str, Any] = {}

  def add(self, step: int, **values: Any) -> None:
    """Adds `values` (numbers, or lists to extend) to `step`'s."""
    if step != self.step:
      self.step, self.values = step, {}
    for key, value in values.items():
      self.values[key] = self.values[key] + value if key in self.values else value


class MetricsWriter:

  def __init__(self, workdir: str, resume_step: Optional[int] = None, tensorboard: bool = True):
    """`resume_step`: the step restored from a checkpoint (0 or None for a fresh run)."""
    os.makedirs(workdir, exist_ok=True)
    self.path = os.path.join(workdir, "metrics.jsonl")
    kept = [r for r in read_jsonl(self.path) if r.get("step", 0) <= (resume_step or 0)]
    atomic_file.write_jsonl(self.path, kept)
    self._file = open(self.path, "a")
    self._tb = None
    if tensorboard:
      self._tb = _summary_writer(os.path.join(workdir, "tb"))

  def write(self, step: int, metrics: Mapping[str, Any]):
    record = {"step": int(step), **{k: _to_python(v) for k, v in metrics.items()}}
    self._file.write(json.dumps(record) + "\n")
    self._file.flush()
    if self._tb is not None:
      for k, v in record.items():
        if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool):
          self._tb.add_scalar(k, v, int(step))
      self._tb.flush()

  def close(self):
    self._file.close()
    if self._tb is not None:
      self._tb.close()

  def __enter__(self) -> "MetricsWriter":
    return self

  def __exit__(self, *exc):
    self.close()
