"""What `python -m experiments.evaluate_candidate` does, kept out of main so it can be tested."""

from __future__ import annotations

import os
import sys
from typing import Any

from absl import app

from kernelzero_jax import atomic_file
from kernelzero_jax import tasks
from kernelzero_jax.sandbox import verdict as V
from kernelzero_jax.sandbox.config import SandboxConfig
from kernelzero_jax.sandbox.evaluate import cuda_visible, evaluate_candidate


def _read(path: str, what: str) -> str:
  try:
    with open(path, encoding="utf-8") as f:
      return f.read()
  except (OSError, UnicodeDecodeError) as e:
    raise app.UsageError(f"cannot read the {what} {path!r}: {e}") from e


def evaluate_from_flags(reference: str | None, level: int | None, problem_id: int | None,
                        kernelbench_dir: str | None, candidate: str, backend: str,
                        device: str | None, json_out: str | None,
                        config_overrides: dict[str, Any]) -> V.Verdict:
  """Resolves the reference, judges the candidate, prints the verdict as the last stdout line."""
  if (reference is None) == (level is None or problem_id is None):
    raise app.UsageError("give either --reference, or --level and --problem_id")
  try:
    task = (tasks.load_reference_file(reference) if reference is not None
            else tasks.load_task(level, problem_id, kernelbench_dir))
  except tasks.TaskError as e:
    raise app.UsageError(str(e)) from e
  device = device or ("cuda" if cuda_visible() else "cpu")
  try:
    config = SandboxConfig(device=device, **config_overrides)
  except ValueError as e:
    raise app.UsageError(str(e)) from e
  if not os.path.isfile(candidate):
    verdict = V.Verdict(status=V.FORMAT_ERROR, backend=backend, device=device, stage="static",
                        reasons=[f"candidate file not found: {candidate}"])
  else:
    verdict = evaluate_candidate(task.source, _read(candidate, "candidate"), backend, config)
  line = verdict.to_json()
  if json_out:
    os.makedirs(os.path.dirname(os.path.abspath(json_out)), exist_ok=True)
    with atomic_file.replacing(json_out) as f:
      f.write(line + "\n")
  sys.stdout.flush()
  print(line, flush=True)
  return verdict
