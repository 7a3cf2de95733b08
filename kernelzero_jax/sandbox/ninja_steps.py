"""What torch's ninja builds say when they fail, and a build that compiles chosen objects first.

`load_inline` writes a build.ninja (main.cpp into main.o, the candidate's .cu into cuda.cuda.o,
both linked into the extension) and runs ninja on all of it, so both objects compile side by
side. Where one of them fails, ninja waits for the other to finish, and the build fails. The
fast build (fast_build.py) falls back to the build as asked when it fails; where it failed in
an object that the build as asked compiles from the same source (the .cu that does not compile,
as most candidates that fail to build do in RL), that object decides the build as asked too,
and `objects_first` compiles it alone before the rest: where it fails, the build fails at once,
with ninja's error, without main.cpp's compile against torch's whole header (21 CPU seconds on
this project's CPU machine: BENCHMARKS.md, `cuda_build --modes=main_plain`), and where it
compiles, ninja goes on with the rest as it would have. Its status is the one the build as
asked would have had either way; only the message lacks the objects not compiled. (An honest
candidate whose fast .cu fails and whose .cu as asked compiles waits for its main.cpp after
the .cu instead of beside it.)
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import subprocess
from typing import Iterator

CUDA_OBJECT = "cuda.cuda.o"  # the object load_inline's build.ninja compiles its cuda.cu into
_FAILED_LINE = re.compile(r"^FAILED: (?:\[code=\d+\] )?(.*)$", re.MULTILINE)
_BUILD_LINE = re.compile(r"^build ([^:\s]+)\s*:", re.MULTILINE)


def failed_outputs(error: BaseException) -> list[str]:
  """The outputs ninja names as failed in a torch build's error ("FAILED: [code=1] cuda.cuda.o"
  or, with older ninja, "FAILED: main.o"), in order; none where the error is not ninja's."""
  return [out for m in _FAILED_LINE.finditer(str(error)) for out in m[1].split()]


def only_cuda_failed(error: BaseException) -> bool:
  """Whether the build failed in its .cu alone: ninja names failed outputs and every one is a
  CUDA object (load_inline's cuda.cu builds into cuda.cuda.o; main.cpp into main.o). A main.cpp
  compiled meanwhile shows in the message as a command, never as FAILED, whether it compiled
  or not: ninja waits for a job under way and names it only where it fails too."""
  outputs = failed_outputs(error)
  return bool(outputs) and all(out.endswith(".cuda.o") for out in outputs)


def failed_objects(error: BaseException) -> list[str]:
  """The object files (not the extension's link) that ninja names as failed in `error`."""
  return [out for out in failed_outputs(error) if out.endswith(".o")]


def build_outputs(build_directory: str) -> set[str]:
  """The outputs that the build.ninja of `build_directory` names (none if it has none)."""
  try:
    with open(os.path.join(build_directory, "build.ninja"), encoding="utf-8") as f:
      return set(_BUILD_LINE.findall(f.read()))
  except OSError:
    return set()


@contextlib.contextmanager
def objects_first(objects: list[str]) -> Iterator[None]:
  """Within it, torch's extension builds compile those of `objects` that their build.ninja
  names alone first (`ninja -v OBJECTS`) and fail with ninja's error, as torch words it,
  where one fails; otherwise ninja builds everything, as it would have. A no-op without
  objects or where this torch runs ninja another way (its `_run_ninja_build` not as known)."""
  from torch.utils import cpp_extension  # pylint: disable=import-outside-toplevel
  run = getattr(cpp_extension, "_run_ninja_build", None)
  if not objects or run is None or list(inspect.signature(run).parameters)[:3] != [
      "build_directory", "verbose", "error_prefix"]:
    yield
    return

  def first(build_directory: str, verbose: bool, error_prefix: str) -> None:
    targets = [o for o in objects if o in build_outputs(build_directory)]
    if targets:
      done = subprocess.run(["ninja", "-v", *targets], cwd=build_directory, check=False,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
      if done.returncode != 0:  # (torch's message: the prefix, then ninja's output)
        raise RuntimeError(f"{error_prefix}: {done.stdout.decode(errors='replace')}")
    run(build_directory, verbose, error_prefix)

  cpp_extension._run_ninja_build = first  # pylint: disable=protected-access
  try:
    yield
  finally:
    cpp_extension._run_ninja_build = run  # pylint: disable=protected-access
