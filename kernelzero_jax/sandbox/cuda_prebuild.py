"""Builds a CUDA candidate's extension beside its worker's start-up, on no GPU.

A CUDA candidate's worker sets itself up (its CUDA context, the reference's module, the
observers: 0.9 s for a lone candidate on an H200, BENCHMARKS.md) and only then imports the
candidate, whose `load_inline` builds the extension (3.3 s, lite). In series.

So for a CUDA candidate on a GPU, with the fast build, the judge starts a prebuilder beside the
worker: a worker (its own process, the guard, the candidate's directory and so its
TORCH_EXTENSIONS_DIR) that never sees a GPU. It imports the candidate, so that its `load_inline`
calls build into that directory, and answers. The candidate's worker meanwhile sets itself up and
then waits for the judge's "go" before it imports the candidate. The judge sends it once the
prebuilder has answered (or run out of time) and is dead, with its batons (the `lock` files
torch's builds leave in a build directory) removed, and, when it did not build the candidate
whole, its builds too (`hand_over`); and not while the judge times the reference meanwhile
(SandboxConfig.reference_first, go_gate.py).

The worker then imports the candidate as it would have without a prebuilder: its `load_inline`
runs ninja, which finds nothing to do where the prebuilder built the same sources with the same
flags, and builds as before where it did not. For the flags to be the same, the prebuilder gets
TORCH_CUDA_ARCH_LIST: what torch derives in the worker from its GPU, and cannot in a process
with none (`arch_list`). The prebuilder tries only the lite build (fast_build's first choice);
where that failed, the worker starts from its fallback, as its own failed lite build would have
made it. So the prebuilder changes how long the worker's build takes, never what the worker
builds, loads or is judged on; and a candidate could write whatever the prebuilder writes into
its directory from its worker anyway.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import time
from typing import Any, Callable

from kernelzero_jax.sandbox import channel
from kernelzero_jax.sandbox import light_names
from kernelzero_jax.sandbox import worker_handle

# The longest a judge waits for its prebuilder. A lite build takes seconds; a longer wait would
# only delay a candidate whose build (or import) takes this long in its worker too. The worker's
# build deadline counts from the "go", so a prebuilder's wait never shortens it.
MAX_WAIT_S = 120.0
REPLY_LIMITS = {"log_lines": 8, "line_chars": 200, "error_chars": 300}
# Where torch builds a worker's extensions (worker._setup_process sets TORCH_EXTENSIONS_DIR).
EXTENSIONS_DIR = "torch_extensions"


def arch_list(capability: int | None, torch_arch_flags: str | None = None) -> str | None:
  """TORCH_CUDA_ARCH_LIST for a GPU of compute `capability` (e.g. 90 -> "9.0+PTX"): what
  torch.utils.cpp_extension derives from one visible device of that capability (clamped to the
  newest architecture this torch was built for), or None if torch has no CUDA architectures or
  the capability is unknown. `torch_arch_flags`: torch._C._cuda_getArchFlags() by default,
  which, unlike torch.cuda.get_arch_list(), starts no CUDA driver in a process that forks."""
  if capability is None:
    return None
  if torch_arch_flags is None:
    import torch  # pylint: disable=import-outside-toplevel
    getter = getattr(torch._C, "_cuda_getArchFlags", None)  # pylint: disable=protected-access
    torch_arch_flags = getter() if getter else ""
  supported = [int(m) for m in re.findall(r"sm_(\d+)", torch_arch_flags or "")]
  if not supported:
    return None
  newest = max((sm // 10, sm % 10) for sm in supported)
  major, minor = min(newest, (capability // 10, capability % 10))
  return f"{major}.{minor}+PTX"


def sanitize(reply: Any) -> dict[str, Any]:
  """What the judge keeps of a prebuilder's reply (it ran candidate code: evidence only)."""
  if not isinstance(reply, dict):
    return {"ok": False, "error": "no reply"}
  out: dict[str, Any] = {"ok": reply.get("ok") is True}
  seconds = reply.get("seconds")
  if worker_handle.finite_number(seconds):
    out["seconds"] = round(float(seconds), 4)
  log = reply.get("build_log")
  if isinstance(log, list):
    out["build_log"] = [str(line)[:REPLY_LIMITS["line_chars"]]
                        for line in log[:REPLY_LIMITS["log_lines"]]]
  if reply.get("error"):
    out["error"] = str(reply["error"])[:REPLY_LIMITS["error_chars"]]
  return out


def clear_for_worker(workdir: str, built: bool) -> int:
  """Readies the candidate's extensions directory for its worker once the prebuilder is dead:
  removes the batons it may have left (a worker's load_inline would wait for them forever),
  and, unless it `built` the candidate whole, everything it built (ninja rebuilds what its log
  lacks, but a build cut short is not worth reasoning about). Returns how many batons it found."""
  root = os.path.join(workdir, EXTENSIONS_DIR)
  batons = glob.glob(os.path.join(root, "*", "lock"))
  if not built:
    shutil.rmtree(root, ignore_errors=True)
  else:
    for baton in batons:
      with contextlib.suppress(FileNotFoundError):
        os.remove(baton)
  return len(batons)


def hand_over(prebuilder, worker, workdir: str, wait_s: float,
              before_go: Callable[[], Any] | None = None,
              worker_for: Callable[[dict[str, Any]], Any] | None = None) -> dict[str, Any]:
  """Waits up to `wait_s` for the prebuilder (a worker_handle.WorkerHandle) and kills it
  (worker_handle.finish_side_worker), readies the directory and tells the worker (another
  WorkerHandle, waiting) to go, once `before_go` returns (the judge timing the reference
  meanwhile). `worker_for(summary)`, if given, names the worker that gets the go, once the
  prebuilder is done (the judge may start a new one instead: Judge._worker_for_the_build).
  Returns the evidence: the reply's summary ("lite_failed": whether its lite build failed, so
  that the worker builds the fallback way), the wait and the batons removed. Whatever happened
  to the prebuilder, the worker builds as it would have without one."""
  summary = {"ok": False, **worker_handle.finish_side_worker(
      prebuilder, wait_s, "prebuild", sanitize, REPLY_LIMITS["error_chars"])}
  summary["batons_removed"] = clear_for_worker(workdir, summary["ok"])
  log = summary.get("build_log", [])
  skip_lite = any(line.startswith("lite build failed") for line in log)
  summary["lite_failed"] = skip_lite
  # Its errors ones the light header cannot mend (light_names.py): the worker skips the fast build.
  skip_light = skip_lite and light_names.CANNOT_HELP in log
  if skip_light:
    summary["skip_light"] = True
  if worker_for is not None:
    worker = worker_for(summary)
  if before_go is not None:
    t0 = time.perf_counter()
    before_go()
    summary["waited_for_judge_s"] = round(time.perf_counter() - t0, 3)
  if worker is None:
    return summary  # none: killed after a failure meanwhile (its judge's wait says why)
  try:
    channel.send(worker.conn, {"cmd": "go", "skip_lite": skip_lite, "skip_light": skip_light},
                 by_value=True)
  except OSError:
    pass  # the worker is gone: its wait for the build says why
  return summary
