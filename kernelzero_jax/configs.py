"""Typed configs from the experiment files' ConfigDicts.

Experiment files under `experiments/configs/` return an `ml_collections.ConfigDict` (so absl's
`--config.x=y` overrides work); the library takes frozen dataclasses. `from_mapping` turns the
one into the other strictly: an unknown or misspelt key is an error that names it and the known
keys, instead of a silently ignored setting in an ablation.
"""

from __future__ import annotations

import dataclasses
import json
import os
import typing
from typing import Any, Mapping, TypeVar

from kernelzero_jax import atomic_file

T = TypeVar("T")


class ConfigError(ValueError):
  """A config that does not describe a run."""


def _as_dict(mapping: Any) -> dict:
  if hasattr(mapping, "to_dict"):  # ml_collections.ConfigDict / FrozenConfigDict
    return mapping.to_dict()
  if isinstance(mapping, Mapping):
    return dict(mapping)
  raise ConfigError(f"expected a mapping, got {type(mapping).__name__}")


def _nested_dataclass(tp: Any):
  """The dataclass type inside `tp` (e.g. `Foo` or `Foo | None`), or None."""
  if dataclasses.is_dataclass(tp):
    return tp
  for arg in typing.get_args(tp):
    if dataclasses.is_dataclass(arg):
      return arg
  return None


def _tuples(value: Any) -> Any:
  """Lists (from JSON or YAML) as tuples, recursively: frozen configs hold tuples."""
  return tuple(_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


def from_mapping(cls: type[T], mapping: Any, path: str = "config") -> T:
  """`cls(**mapping)`, recursing into fields whose type is a dataclass; lists become tuples
  (recursively)."""
  values = _as_dict(mapping)
  fields = {f.name: f for f in dataclasses.fields(cls)}
  unknown = sorted(set(values) - set(fields))
  if unknown:
    raise ConfigError(f"{path}: unknown field(s) {unknown}; known: {sorted(fields)}")
  hints = typing.get_type_hints(cls)
  kwargs = {}
  for name, value in values.items():
    sub = _nested_dataclass(hints[name])
    if sub is not None and value is not None and not dataclasses.is_dataclass(value):
      value = from_mapping(sub, value, f"{path}.{name}")
    elif isinstance(value, list):
      value = _tuples(value)
    kwargs[name] = value
  try:
    return cls(**kwargs)
  except (TypeError, ValueError) as e:
    raise ConfigError(f"{path}: {e}") from e


def _placeholder_type(tp: Any):
  """The non-None type of an Optional[...] hint (e.g. str for Optional[str]), else None."""
  args = [typing.get_origin(a) or a for a in typing.get_args(tp) if a is not type(None)]
  return args[0] if len(args) == 1 and isinstance(args[0], type) else None


def config_dict(cls: type, **overrides: Any):
  """An `ml_collections.ConfigDict` of the dataclass `cls`'s defaults (nested dataclasses become
  nested ConfigDicts), with `overrides` applied. Experiment files start from it, so the defaults
  live in one place: the dataclasses. Optional fields that default to None become typed
  placeholders, so `--config.x=y` can still set them from the command line."""
  import ml_collections  # pylint: disable=import-outside-toplevel
  hints = typing.get_type_hints(cls)
  cd = ml_collections.ConfigDict()
  for f in dataclasses.fields(cls):
    if f.default is not dataclasses.MISSING:
      default = f.default
    elif f.default_factory is not dataclasses.MISSING:
      default = f.default_factory()
    else:
      raise ConfigError(f"{cls.__name__}.{f.name} has no default")
    sub = _nested_dataclass(hints[f.name])
    if sub is not None and default is not None:
      cd[f.name] = config_dict(sub, **{k.name: getattr(default, k.name)
                                       for k in dataclasses.fields(sub)})
    elif default is None and _placeholder_type(hints[f.name]) is not None:
      cd[f.name] = ml_collections.config_dict.placeholder(_placeholder_type(hints[f.name]))
    else:
      cd[f.name] = default
  _merge(cd, overrides, cls.__name__)
  return cd


def _merge(cd, overrides: Mapping[str, Any], path: str) -> None:
  """Sets `overrides` into the ConfigDict `cd`; nested mappings update nested ConfigDicts field
  by field (so `learner=dict(rollout=dict(group_size=4))` keeps rollout's other fields)."""
  for key, value in overrides.items():
    if key not in cd:
      raise ConfigError(f"{path}: unknown field {key!r}; known: {sorted(cd)}")
    if isinstance(value, Mapping) and hasattr(cd[key], "to_dict"):
      _merge(cd[key], value, f"{path}.{key}")
    elif dataclasses.is_dataclass(value):
      cd[key] = config_dict(type(value), **{k.name: getattr(value, k.name)
                                            for k in dataclasses.fields(value)})
    else:
      cd[key] = value


def to_dict(config: Any) -> Any:
  """A JSON-ready dict of a (nested) dataclass config, for the workdir's config record."""
  return dataclasses.asdict(config) if dataclasses.is_dataclass(config) else config


def _differences(a: Any, b: Any, path: str = "") -> list[str]:
  """Dotted paths where two JSON trees differ."""
  if isinstance(a, dict) and isinstance(b, dict):
    return [d for k in sorted(set(a) | set(b))
            for d in _differences(a.get(k), b.get(k), f"{path}.{k}" if path else k)]
  return [] if a == b else [path]


def check_workdir_config(workdir: str, config: Any, resumable: tuple[str, ...] = ()) -> None:
  """Records `config` as workdir/config.json, or refuses to resume a workdir made with another
  config (one workdir is one experiment); the dotted fields in `resumable` may change (e.g. the
  number of steps, to train longer)."""
  path = os.path.join(workdir, "config.json")
  record = json.loads(json.dumps(to_dict(config)))  # tuples -> lists, as on disk
  if os.path.exists(path):
    with open(path) as f:
      saved = json.load(f)
    changed = [d for d in _differences(saved, record) if d not in resumable]
    if changed:
      raise ConfigError(f"{workdir} holds a run with a different config ({', '.join(changed)} "
                        "differ); use a new workdir, or the same config to resume")
  os.makedirs(workdir, exist_ok=True)
  atomic_file.write_json(path, record, indent=2, sort_keys=True)
