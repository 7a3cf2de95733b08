"""Files that a reader never sees half written: written beside their path, then renamed over it.

Every record a run keeps (configs, summaries, metrics rewritten on resume, sample files, the
sandbox's verdicts and shared reference facts) is written this way, so that a run killed mid-write
leaves the previous file, never a truncated one that a resume would then fail to parse.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import IO, Any, Iterable, Iterator


@contextlib.contextmanager
def replacing(path: str) -> Iterator[IO[str]]:
  """A text file to write in place of `path`: when the block ends without an error it replaces
  `path` (os.replace, atomic within one filesystem); when the block raises, it is removed and
  `path` stays as it was. Its name carries the process id, so that processes writing one path at
  once never write into each other's file (the last to finish wins)."""
  tmp = f"{path}.{os.getpid()}.tmp"
  try:
    with open(tmp, "w", encoding="utf-8") as f:
      yield f
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(OSError):
      os.remove(tmp)
    raise


def write_json(path: str, obj: Any, **dump_kwargs: Any) -> None:
  """`obj` as JSON in place of `path` (json.dump's keyword arguments pass through)."""
  with replacing(path) as f:
    json.dump(obj, f, **dump_kwargs)


def write_jsonl(path: str, rows: Iterable[Any], **dumps_kwargs: Any) -> None:
  """One JSON line per row in place of `path`."""
  with replacing(path) as f:
    f.writelines(json.dumps(row, **dumps_kwargs) + "\n" for row in rows)
