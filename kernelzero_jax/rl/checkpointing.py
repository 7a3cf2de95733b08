"""Orbax checkpoints of the train state plus the learner's own JSON state, in workdir/checkpoints.

  with Checkpointer(workdir, max_to_keep=3) as ckpt:
    restored = ckpt.restore_latest(abstract_state)   # None in a fresh workdir
    ...
    ckpt.save(step, state, learner_state)            # asynchronous; waited for on close

Each checkpoint is a Composite of
  "state":   the TrainState pytree (params, opt_state, step, rng), StandardSave
  "learner": a JSON-serialisable dict (data cursor, frontier, ...), JsonSave
Orbax writes a checkpoint into a temporary directory and renames it when complete, so a process
killed mid-save leaves the previous checkpoint as the latest usable one.
"""

from __future__ import annotations

import os
from typing import Any, Optional

import jax
import orbax.checkpoint as ocp


class Checkpointer:

  def __init__(self, workdir: str, max_to_keep: Optional[int] = 3):
    self.directory = os.path.abspath(os.path.join(workdir, "checkpoints"))
    options = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True)
    self._manager = ocp.CheckpointManager(self.directory, options=options,
                                          item_names=("state", "learner"))

  def save(self, step: int, state: Any, learner_state: Optional[dict] = None,
           force: bool = False) -> bool:
    """Starts saving `state` and `learner_state` as checkpoint `step` (asynchronously)."""
    args = ocp.args.Composite(state=ocp.args.StandardSave(state),
                              learner=ocp.args.JsonSave(learner_state or {}))
    return self._manager.save(int(step), args=args, force=force)

  def latest_step(self) -> Optional[int]:
    return self._manager.latest_step()

  def all_steps(self) -> list[int]:
    return list(self._manager.all_steps())

  def restore(self, step: int, abstract_state: Any) -> tuple[Any, dict]:
    """(state, learner_state) of checkpoint `step`; `abstract_state` gives the tree structure,
    shapes, dtypes and shardings (e.g. `jax.eval_shape` of the state, or a concrete state)."""
    abstract_state = jax.tree.map(ocp.utils.to_shape_dtype_struct, abstract_state)
    args = ocp.args.Composite(state=ocp.args.StandardRestore(abstract_state),
                              learner=ocp.args.JsonRestore())
    restored = self._manager.restore(int(step), args=args)
    return restored["state"], dict(restored["learner"] or {})

  def restore_latest(self, abstract_state: Any) -> Optional[tuple[Any, dict]]:
    step = self.latest_step()
    return None if step is None else self.restore(step, abstract_state)

  def wait(self):
    self._manager.wait_until_finished()

  def close(self):
    self._manager.wait_until_finished()
    self._manager.close()

  def __enter__(self) -> "Checkpointer":
    return self

  def __exit__(self, *exc):
    self.close()
