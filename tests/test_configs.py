"""Typed configs from ConfigDicts: defaults in one place, strict about unknown keys."""

from __future__ import annotations

import dataclasses
from typing import Optional

import pytest

from kernelzero_jax import configs


@dataclasses.dataclass(frozen=True)
class Inner:
  a: int = 1
  b: float = 2.0


@dataclasses.dataclass(frozen=True)
class Outer:
  inner: Inner = Inner()
  name: Optional[str] = None
  paths: tuple[str, ...] = ()
  flag: bool = False


def test_config_dict_round_trips_defaults_and_merges_nested_overrides():
  cd = configs.config_dict(Outer)
  assert configs.from_mapping(Outer, cd) == Outer()
  cd = configs.config_dict(Outer, inner=dict(b=5.0), flag=True)
  assert configs.from_mapping(Outer, cd) == Outer(inner=Inner(a=1, b=5.0), flag=True)


def test_placeholders_accept_a_value_later():
  cd = configs.config_dict(Outer)
  cd.name = "x"  # a typed placeholder: a str is accepted
  cd.paths = ("p", "q")
  assert configs.from_mapping(Outer, cd) == Outer(name="x", paths=("p", "q"))
  with pytest.raises(TypeError):
    cd.name = 3


def test_unknown_keys_are_named():
  with pytest.raises(configs.ConfigError, match=r"Outer.inner: unknown field 'c'"):
    configs.config_dict(Outer, inner=dict(c=1))
  with pytest.raises(configs.ConfigError, match=r"config.inner: unknown field\(s\) \['c'\]"):
    configs.from_mapping(Outer, {"inner": {"c": 1}})
  with pytest.raises(configs.ConfigError, match="expected a mapping"):
    configs.from_mapping(Outer, 3)


def test_lists_become_tuples_and_constructor_errors_are_config_errors():
  assert configs.from_mapping(Outer, {"paths": ["a"]}).paths == ("a",)

  @dataclasses.dataclass(frozen=True)
  class Checked:
    n: int = 1

    def __post_init__(self):
      if self.n < 1:
        raise ValueError("n must be >= 1")

  with pytest.raises(configs.ConfigError, match="config: n must be >= 1"):
    configs.from_mapping(Checked, {"n": 0})
