"""evidence.IntegritySnapshot watches the worker's own methods wherever they are defined: on
worker._Worker itself, or on the mixins that hold its stages (worker_build, worker_run)."""

import pytest

from kernelzero_jax.sandbox import evidence
from kernelzero_jax.sandbox import worker
from kernelzero_jax.sandbox import worker_build
from kernelzero_jax.sandbox import worker_run


def test_a_fresh_snapshot_sees_nothing_replaced():
  assert evidence.IntegritySnapshot().violations() == []


@pytest.mark.parametrize("owner, name", [
    (worker._Worker, "time"),  # a stage's method, shadowed on the class that inherits it
    (worker._Worker, "build"),
    (worker._Worker, "serve"),  # its own
    (worker_run.RunSteps, "time"),  # where it is defined
    (worker_build.BuildSteps, "_outside_the_hold"),
])
def test_a_worker_method_replaced_on_any_class_is_seen(monkeypatch, owner, name):
  snapshot = evidence.IntegritySnapshot()
  monkeypatch.setattr(owner, name, lambda *a, **k: None, raising=False)
  found = snapshot.violations()
  assert any(f"_Worker.{name} " in v or f"{owner.__name__}.{name} " in v for v in found), found
