"""A named registry: how config strings choose advantage estimators, loss aggregations, reward
schedules and speed terms (and how users add their own for ablations)."""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class Registry(dict, Generic[T]):
  """A dict of name -> entry that refuses duplicates and names the known entries on a miss."""

  def __init__(self, kind: str):
    super().__init__()
    self.kind = kind

  def add(self, name: str, entry: T) -> T:
    if name in self:
      raise ValueError(f"{self.kind} {name!r} is already registered")
    self[name] = entry
    return entry

  def register(self, name: str) -> Callable[[T], T]:
    """Decorator form of `add`."""
    def wrap(fn: T) -> T:
      self.add(name, fn)
      return fn
    return wrap

  def lookup(self, name: str) -> T:
    try:
      return self[name]
    except KeyError:
      raise ValueError(f"unknown {self.kind} {name!r}; known: {sorted(self)}") from None


