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


def _pure(tree: Any) -> Any:
  """An Orbax-restored nnx.State (nested dicts, Variables as {"value": array}, list indices as
  strings) as the pure dict that `nnx.replace_by_pure_dict` takes."""
  if isinstance(tree, dict):
    if set(tree) == {"value"}:
      return tree["value"]
    return {int(k) if isinstance(k, str) and k.isdigit() else k: _pure(v)
            for k, v in tree.items()}
  return tree


def load_policy_params(workdir: str, model: Any, step: Optional[int] = None) -> int:
  """Overwrites `model`'s parameters (in place, keeping their dtype and sharding) with the
  policy of checkpoint `step` (default: the latest) of another run's workdir, e.g. an SFT warm
  start for RL. Only the parameters are read: that run's optimizer may differ from this one's.
  Returns the step loaded."""
  from flax import nnx  # pylint: disable=import-outside-toplevel
  # Absolute: Orbax refuses a relative path (e.g. a --workdir given relative to the cwd).
  directory = os.path.abspath(os.path.join(workdir, "checkpoints"))
  if not os.path.isdir(directory):
    raise FileNotFoundError(f"no checkpoints in {workdir} (expected {directory})")
  manager = ocp.CheckpointManager(directory, item_names=("state", "learner"))
  try:
    step = manager.latest_step() if step is None else step
    if step is None:
      raise FileNotFoundError(f"{directory} holds no finished checkpoint")
    raw = manager.restore(int(step), args=ocp.args.Composite(state=ocp.args.StandardRestore()))
  finally:
    manager.close()
  _, state = nnx.split(model)
  loaded = _pure(raw["state"]["params"])
  flat = jax.tree_util.tree_flatten_with_path
  want = {k: v.shape for k, v in flat(nnx.to_pure_dict(state))[0]}
  have = {k: v.shape for k, v in flat(loaded)[0]}
  wrong = [jax.tree_util.keystr(k) for k in want if have.get(k, want[k]) != want[k]]
  if wrong or set(want) != set(have):
    missing = [jax.tree_util.keystr(k) for k in set(want) ^ set(have)]
    raise ValueError(f"checkpoint {step} of {workdir} does not fit this model: shapes differ "
                     f"for {wrong[:5]}, keys differ: {missing[:5]}")

  def put(var, value):  # keep this model's dtype and sharding
    current = var[...]
    return var.replace(jax.device_put(jax.numpy.asarray(value, current.dtype), current.sharding))

  nnx.replace_by_pure_dict(state, loaded, replace_fn=put)
  nnx.update(model, state)
  return int(step)
