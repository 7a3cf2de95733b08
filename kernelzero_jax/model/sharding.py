"""Sharding rules, kept apart from the model config: logical axes per parameter, and a mapping
of logical axes to mesh axes (FSDP and tensor parallel by default)."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

# Parameter name (the last path element) -> logical axis of each dimension.
LOGICAL_AXES: dict[str, tuple[str | None, ...]] = {
    "embed_VxD": ("vocab", "embed"),
    "lm_head_DxV": ("embed", "vocab"),
    "wq_DxNxH": ("embed", "heads", None),
    "bq_NxH": ("heads", None),
    "wk_DxKxH": ("embed", "kv_heads", None),
    "bk_KxH": ("kv_heads", None),
    "wv_DxKxH": ("embed", "kv_heads", None),
    "bv_KxH": ("kv_heads", None),
    "wo_NxHxD": ("heads", None, "embed"),
    "gate_DxF": ("embed", "mlp"),
    "up_DxF": ("embed", "mlp"),
    "down_FxD": ("mlp", "embed"),
    "weight": (None,),  # RMSNorm scales are small: replicated
}


@dataclasses.dataclass(frozen=True)
class ShardingConfig:
  """Mesh shape and logical-to-mesh rules. A dimension that a mesh axis does not divide is
  replicated (e.g. 2 key/value heads on a tensor-parallel axis of 4)."""

  mesh_axes: tuple[str, ...] = ("fsdp", "tp")
  mesh_shape: tuple[int, ...] | None = None  # None: all devices on fsdp
  rules: tuple[tuple[str, str | None], ...] = (
      ("vocab", "tp"), ("embed", "fsdp"), ("heads", "tp"), ("kv_heads", "tp"), ("mlp", "tp"),
      ("batch", "fsdp"))

  def make_mesh(self, devices=None) -> Mesh:
    devices = list(devices if devices is not None else jax.devices())
    shape = self.mesh_shape or (len(devices),) + (1,) * (len(self.mesh_axes) - 1)
    if int(np.prod(shape)) != len(devices):
      raise ValueError(f"mesh shape {shape} does not use the {len(devices)} devices")
    return Mesh(np.array(devices).reshape(shape), self.mesh_axes)

  def spec(self, logical: tuple[str | None, ...], shape: tuple[int, ...], mesh: Mesh
           ) -> PartitionSpec:
    rules = dict(self.rules)
    axes = []
    for dim, name in zip(shape, logical):
      mesh_axis = rules.get(name) if name else None
      if mesh_axis is not None and dim % mesh.shape[mesh_axis] != 0:
        mesh_axis = None
      axes.append(mesh_axis)
    return PartitionSpec(*axes)

  def param_sharding(self, name: str, shape: tuple[int, ...], mesh: Mesh) -> NamedSharding:
    logical = LOGICAL_AXES.get(name, (None,) * len(shape))
    return NamedSharding(mesh, self.spec(logical, shape, mesh))

  def batch_sharding(self, ndim: int, batch: int, mesh: Mesh) -> NamedSharding:
    """Activations and caches: the leading (batch) axis on the batch rule's mesh axis."""
    return NamedSharding(mesh, self.spec(("batch",) + (None,) * (ndim - 1),
                                         (batch,) + (1,) * (ndim - 1), mesh))


def shard_model(model: nnx.Module, mesh: Mesh, config: ShardingConfig | None = None) -> None:
  """Places every parameter of `model` on `mesh` according to the rules (in place)."""
  config = config or ShardingConfig()
  state = nnx.state(model, nnx.Param)

  def place(path, value: Any):
    name = str(path[-1].key if hasattr(path[-1], "key") else path[-1])
    return jax.device_put(value, config.param_sharding(name, value.shape, mesh))

  pure = nnx.to_pure_dict(state)
  placed = jax.tree_util.tree_map_with_path(place, pure)
  nnx.replace_by_pure_dict(state, placed)
  nnx.update(model, state)
