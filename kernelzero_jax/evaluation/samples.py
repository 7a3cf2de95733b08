"""Where candidate kernels come from in an evaluation: files on disk or a policy's samples.

File naming (KernelBench's own run layout, so its runs are read as they are):

    level_{L}_problem_{ID}_sample_{S}_kernel.py       the candidate's Python source, or
    level_{L}_problem_{ID}_sample_{S}_completion.txt  a raw completion (markdown, chat tokens),
                                                      from which the code block is extracted

L is the KernelBench level, ID the problem id (the number that starts its file name) and S the
sample index from 0. A policy's completions are written in the same layout under
workdir/samples/, so a generated run can be evaluated again, or elsewhere, with --samples_dir.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Sequence

from kernelzero_jax import atomic_file

_SAMPLE_FILE_RE = re.compile(
    r"^level_(\d+)_problem_(\d+)_sample_(\d+)_(kernel\.py|completion\.txt)$")


@dataclasses.dataclass(frozen=True)
class SampleFile:
  level: int
  problem_id: int
  sample: int
  path: str
  is_completion: bool  # a raw completion (extract the code) rather than a kernel source


def sample_file_name(level: int, problem_id: int, sample: int, completion: bool) -> str:
  kind = "completion.txt" if completion else "kernel.py"
  return f"level_{level}_problem_{problem_id}_sample_{sample}_{kind}"


def scan_samples(samples_dir: str) -> tuple[dict[tuple[int, int, int], SampleFile], list[str]]:
  """{(level, problem_id, sample): file} of a directory (searched recursively), and the names
  of files that look like samples but do not follow the layout. A kernel file wins over a
  completion file of the same sample."""
  if not os.path.isdir(samples_dir):
    raise FileNotFoundError(f"samples directory {samples_dir} does not exist")
  found: dict[tuple[int, int, int], SampleFile] = {}
  odd: list[str] = []
  for root, _, files in os.walk(samples_dir):
    for name in sorted(files):
      m = _SAMPLE_FILE_RE.match(name)
      if not m:
        if name.endswith((".py", ".txt")):
          odd.append(os.path.join(root, name))
        continue
      key = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
      sample = SampleFile(*key, path=os.path.join(root, name),
                          is_completion=m.group(4) == "completion.txt")
      if key not in found or (found[key].is_completion and not sample.is_completion):
        found[key] = sample
  return found, odd


def write_completions(directory: str, level: int, problem_id: int, start_sample: int,
                      completions: Sequence[str]) -> None:
  """Writes completions as `..._completion.txt` files (atomically, one by one)."""
  os.makedirs(directory, exist_ok=True)
  for i, text in enumerate(completions):
    path = os.path.join(directory, sample_file_name(level, problem_id, start_sample + i, True))
    with atomic_file.replacing(path) as f:
      f.write(text)


def read_candidate(sample: SampleFile) -> tuple[str | None, str | None]:
  """(candidate source, None) or (None, why there is none)."""
  # pylint: disable-next=import-outside-toplevel
  from kernelzero_jax.coder.extract import extract_code
  try:
    with open(sample.path, encoding="utf-8") as f:
      text = f.read()
  except (OSError, UnicodeDecodeError) as e:
    return None, f"cannot read {sample.path}: {e}"
  if not sample.is_completion:
    return text, None
  extraction = extract_code(text)
  return extraction.code, extraction.reason
