"""The resumable step loop that the RL learner and the SFT trainer share.

  metrics = run_resumable(trainer, workdir, step_fn, num_steps=..., checkpoint_every=..., ...)

`trainer.state` is the TrainState. The loop restores the latest checkpoint of `workdir` into it
(the learner's own JSON state holds the step), runs `step_fn(step)` for the remaining steps,
logs each step's metrics (JSONL + TensorBoard), checkpoints every `checkpoint_every` steps and
at the end, and shows a progress bar.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Callable, Optional

from kernelzero_jax.metrics import MetricsWriter
from kernelzero_jax.rl.checkpointing import Checkpointer


def run_resumable(trainer: Any, workdir: str, step_fn: Callable[[int], dict[str, Any]], *,
                  num_steps: int, checkpoint_every: int, max_checkpoints: Optional[int],
                  progress: bool, desc: str,
                  postfix: Callable[[dict[str, Any]], dict[str, str]],
                  initial_metrics: Optional[Callable[[], Optional[dict[str, Any]]]] = None
                  ) -> dict[str, Any]:
  """Runs steps start+1..num_steps; returns the last step's metrics. `initial_metrics`, on a
  fresh run only, gives the metrics logged as step 0 (e.g. a held-out loss before training)."""
  os.makedirs(workdir, exist_ok=True)
  metrics: dict[str, Any] = {}
  with Checkpointer(workdir, max_to_keep=max_checkpoints) as ckpt:
    start = 0
    restored = ckpt.restore_latest(trainer.state)
    if restored is not None:
      trainer.state, loop_state = restored
      start = int(loop_state["step"])
      logging.info("%s: resumed from step %d in %s", desc, start, workdir)
    with MetricsWriter(workdir, resume_step=start) as writer:
      if start == 0 and initial_metrics is not None:
        first = initial_metrics()
        if first is not None:
          writer.write(0, first)
      bar = None
      if progress:
        from tqdm import tqdm  # pylint: disable=import-outside-toplevel
        bar = tqdm(total=num_steps, initial=start, desc=desc, unit="step")
      for step in range(start + 1, num_steps + 1):
        metrics = step_fn(step)
        writer.write(step, metrics)
        if step % checkpoint_every == 0 or step == num_steps:
          ckpt.save(step, trainer.state, {"step": step})
          ckpt.wait()  # the next step donates the state: never let it race the write
        if bar is not None:
          bar.update(1)
          bar.set_postfix(**postfix(metrics))
      if bar is not None:
        bar.close()
  return metrics
