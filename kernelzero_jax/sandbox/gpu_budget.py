"""Who may use the GPU when, and how much of its memory: the slots judges hold (lock files) and
the memory model that decides how many of them a check holds, whether a judge keeps its memory
or its problem's weights on the GPU between its holds, and how many judges of large weights
build their models on the host at once. Pure functions of sizes, and file locks: no torch.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import random
import subprocess
import tempfile
from typing import Iterator


def _lock_path(device_index: int, slot: int, lock_dir: str | None) -> str:
  directory = lock_dir or tempfile.gettempdir()
  name = (f"kernelzero_sandbox_gpu{device_index}.lock" if slot == 0
          else f"kernelzero_sandbox_gpu{device_index}.slot{slot}.lock")
  return os.path.join(directory, name)


def slots_taken(slots: int, exclusive: bool, width: int = 1) -> int:
  """How many of a GPU's `slots` gpu_slots takes: all of them for an exclusive hold, else
  `width` kept between 1 and `slots`."""
  return slots if exclusive else max(1, min(width, slots))


@contextlib.contextmanager
def gpu_slots(device_index: int, slots: int = 1, exclusive: bool = True,
              lock_dir: str | None = None, width: int = 1, wait: bool = True,
              timings_first: bool = False):
  """GPU work of all judges on one GPU, coordinated by `slots` lock files.

  Exclusive (timing, or everything when slots is 1) holds every slot, so nothing else runs on
  the GPU; shared (untimed correctness checks) holds `width` of them (one group of consecutive
  slots: 0..width-1, width..2*width-1, ...), so checks of a problem whose memory would not fit
  `slots` times still share the GPU with `slots / width` others (check_width). A free group is
  taken if there is one; otherwise the holder waits for one. Whoever waits while holding a slot
  takes its slots in index order, and single slots are taken without waiting for another: no
  deadlock. Yields whether the slots are held: always, unless `wait` is False and none was
  free.

  `timings_first` (SandboxConfig.timings_first; the GPU's other holders must pass the same): an
  exclusive holder that has to wait closes a turnstile until it holds every slot, and a shared
  holder passes that turnstile before it takes a slot (without `wait`: none is taken while it is
  closed). A waiting timing then waits for the checks under way only. Without it, checks that
  start while the timing takes the slots in index order take those it has not reached. (In a
  batch of 259 on an H200, 70 of the 258 gaps between timings lasted 0.4-2.5 s, 69 s in all,
  and by an estimate from those verdicts the next timing waited for these slots through 28.7 s
  of them, and the rest of its wait was for the start-up fence: gpu_steps.timing_gaps,
  BENCHMARKS.md.) No deadlock: a holder takes the turnstile holding no slot, and the exclusive
  one waits for slots only."""
  width = slots_taken(slots, exclusive, width)
  groups = [range(g * width, (g + 1) * width) for g in range(slots // width)]
  order = list(range(len(groups)))
  random.Random(os.getpid()).shuffle(order)
  files = []

  def take(slot: int, wait: bool) -> bool:
    f = open(_lock_path(device_index, slot, lock_dir), "a+")  # pylint: disable=consider-using-with
    try:
      fcntl.flock(f, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      f.close()
      return False
    files.append(f)
    return True

  def release() -> None:
    for f in reversed(files):
      with contextlib.suppress(OSError):
        fcntl.flock(f, fcntl.LOCK_UN)
      f.close()
    files.clear()

  # (An exclusive holder that does not wait never closes the turnstile: none opened for it.)
  gate = (open(_turnstile_path(device_index, lock_dir), "a+")  # pylint: disable=consider-using-with
          if timings_first and slots > 1 and (wait or not exclusive) else None)
  try:
    if gate is not None and not exclusive and not _pass(gate, wait):
      yield False  # a timing waits for the GPU: no new check now
      return
    for g in order:  # a free group if there is one
      if all(take(slot, wait=False) for slot in groups[g]):
        break
      release()
    else:  # all busy: wait for one, its slots in index order
      if not wait:
        yield False
        return
      if gate is not None and exclusive:
        fcntl.flock(gate, fcntl.LOCK_EX)  # closed until every slot is held (gate.close opens it)
      for slot in groups[order[0]]:
        take(slot, wait=True)
      if gate is not None:
        gate.close()
        gate = None
    yield True
  finally:
    release()
    if gate is not None:
      gate.close()


def _turnstile_path(device_index: int, lock_dir: str | None) -> str:
  """The lock file of gpu_slots' turnstile for `timings_first`."""
  return os.path.join(lock_dir or tempfile.gettempdir(),
                      f"kernelzero_sandbox_gpu{device_index}.timings_first.lock")


def _pass(gate, wait: bool) -> bool:
  """Passes the turnstile `gate` (an open file): waits while an exclusive holder has it closed,
  unless not `wait`; whether it passed."""
  if wait:
    fcntl.flock(gate, fcntl.LOCK_SH)
  elif not took(gate, fcntl.LOCK_SH):
    return False
  fcntl.flock(gate, fcntl.LOCK_UN)
  return True


def gpu_lock(device_index: int, slots: int = 1):
  """The whole GPU (every slot): what timing needs, and what outside timers take too."""
  return gpu_slots(device_index, slots, exclusive=True)


# What one correctness check holds on the GPU at its peak: three input sets (the judge's inputs,
# the worker's own inputs, and the set made again where those two differ after their forwards:
# Judge._inputs_kept) and two of what a forward makes (the reference's outputs in the judge, the
# candidate's in the worker; where larger, the largest result inside the forward:
# problem.output_bytes). The reference checks before it hold no more (two seeds' outputs and
# inputs, then one seed's again). For KernelBench's elementwise problems that is 5 input
# sets; on an H200, 4 were too few: 4 judges checking the 6 GiB ones at once ran out of memory
# (BENCHMARKS.md). Counted in input sets alone, a 16 MiB matmul input that makes a 4 GiB output
# (level 1 problems 7 and 9, level 2 problem 59) passed for 80 MiB a check.
CHECK_INPUT_SETS = 3
CHECK_OUTPUT_SETS = 2
# The share of the GPU's memory that checks running at once may fill (the rest: the allocators'
# slack, the reference's weights)...
CHECK_MEMORY_SHARE = 0.8
# ...less what every judge on the GPU holds whatever it is doing: its CUDA context and its
# worker's, with the worker's L2 flush buffer (518 + 880 MiB on an H200, 708-712 + 880 MiB on an
# H100, torch 2.11: 24 judges at once held 36 GiB of an H100's 79 so).
JUDGE_GPU_BYTES = 1600 * 2**20


def check_bytes(input_bytes: int, output_bytes: int | None = None) -> int:
  """The GPU memory of one correctness check of a problem whose input set has `input_bytes` and
  whose forward makes `output_bytes` (problem.output_bytes; unknown: as much as its inputs)."""
  outputs = input_bytes if output_bytes is None else output_bytes
  return CHECK_INPUT_SETS * input_bytes + CHECK_OUTPUT_SETS * outputs


def _check_room(gpu_bytes: int, judges: int) -> float:
  """The bytes that checks running at once may fill on a GPU of `gpu_bytes` beside `judges`
  judges' processes."""
  return CHECK_MEMORY_SHARE * gpu_bytes - judges * JUDGE_GPU_BYTES


def checks_fit(one_check_bytes: int, slots: int, gpu_bytes: int, judges: int = 1) -> bool:
  """Whether `slots` correctness checks of `one_check_bytes` each (check_bytes) fit in a GPU of
  `gpu_bytes` at once, beside `judges` judges' processes (then each holds one of the slots:
  check_width)."""
  return one_check_bytes * slots <= _check_room(gpu_bytes, judges)


def judges_with_room(gpu_bytes: int) -> int:
  """The most judges whose processes leave correctness checks any room on a GPU of `gpu_bytes`
  (beyond it every check holds the GPU alone: check_width)."""
  return max(0, math.ceil(CHECK_MEMORY_SHARE * gpu_bytes / JUDGE_GPU_BYTES) - 1)


def smallest_gpu_bytes() -> int | None:
  """The memory of the smallest GPU this process may use (CUDA_VISIBLE_DEVICES's, else every
  one), as nvidia-smi reports it: read without making a CUDA context here, where the caller
  (the pool, beside the policy's JAX) must not. None where nvidia-smi is missing or fails."""
  command = ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"]
  visible = os.environ.get("CUDA_VISIBLE_DEVICES")
  if visible is not None:
    if not visible.strip():
      return None
    command += ["-i", visible]
  try:
    proc = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    mib = [int(line) for line in proc.stdout.split()] if proc.returncode == 0 else []
  except (OSError, subprocess.TimeoutExpired, ValueError):
    return None
  return min(mib) * 2**20 if mib else None


def check_width(one_check_bytes: int, slots: int, gpu_bytes: int, judges: int = 1) -> int:
  """How many of `slots` slots a correctness check of `one_check_bytes` (check_bytes) holds
  (gpu_slots' width): each slot stands for 1/slots of the memory that checks_fit lets checks
  fill, so that checks of any problems holding the slots at once fit: 1 when `slots` such
  checks fit (checks_fit), `slots` (the GPU alone) when one check needs more than `slots - 1`
  slots' share."""
  room = _check_room(gpu_bytes, judges)
  if room <= 0:
    return slots
  return max(1, min(slots, math.ceil(one_check_bytes * slots / room)))


def memory_kept_fits(one_check_bytes: int, slots: int, gpu_bytes: int, judges: int = 1) -> bool:
  """Whether a judge may keep its checks' GPU memory (`one_check_bytes`: check_bytes) from one
  hold to the next instead of freeing it before it lets go (Judge._release_gpu_memory): when,
  beside `slots` checks running in the slots, every one of the `judges` judges on the GPU could
  keep as much (checks_fit with `slots + judges` checks). Then no judge's memory kept outside a
  hold can starve a check."""
  return checks_fit(one_check_bytes, slots + judges, gpu_bytes, judges)


# The share of the GPU's memory that judges' model weights may take between their holds, each
# judge's twice (its reference's from its start-up, its worker's candidate's from its first hold
# to its last): three quarters of what CHECK_MEMORY_SHARE leaves, the rest the allocators' slack.
# Level-2 problems 55, 56 and 59 have 4 GiB of weights (a 32768 x 32768 Linear), 66 and 68 1 GiB;
# 24 judges of one of them would hold 48-192 GiB so, in no hold. 0.15 rather than 0.1: on an H100
# in four batches of 259 (2026-12-07), 12-13 judges instead of 46-50 ran alone for their weights
# (the level-2 GEMMs' 512 MiB a judge no longer refused) and the batch was 1.04x and 1.05x as
# fast, the same verdicts (BENCHMARKS.md, "The weights ledger's share at 0.15").
WEIGHTS_KEPT_SHARE = 0.15


def weights_kept_fit(weight_bytes: int, gpu_bytes: int, judges: int = 1,
                     share: float = WEIGHTS_KEPT_SHARE) -> bool:
  """Whether a judge may keep its problem's weights on the GPU between its holds (its reference
  uploaded at its start-up, its worker's model kept from one hold to the next): when every one
  of the `judges` judges on the GPU could keep as much, twice over, in `share` of it
  (SandboxConfig.weights_kept_share). Otherwise its whole evaluation runs in one hold of the
  whole GPU, its reference uploaded in it (Judge._weights_apart)."""
  return judges * 2 * weight_bytes <= share * gpu_bytes


@contextlib.contextmanager
def weights_kept(device_index: int, weight_bytes: int, gpu_bytes: int,
                 lock_dir: str | None = None,
                 share: float = WEIGHTS_KEPT_SHARE) -> Iterator[tuple[bool, int]]:
  """A place in one GPU's ledger of the model weights that judges keep on it between their
  holds, for twice `weight_bytes` (a judge's reference and its worker's candidate), where the
  places held and this one fit `share` of `gpu_bytes`: yields (whether it has one,
  the bytes the other places hold), the place kept until the context ends. The same bound as
  weights_kept_fit's, counted over the judges that keep weights now instead of over every judge
  that could (on an H100 with 24 judges, every level-2 GEMM's 256 MiB judge ran its whole
  evaluation alone for it). A place is a file its holder keeps locked: the place of a holder that
  died is not counted, and goes."""
  directory = os.path.join(lock_dir or tempfile.gettempdir(),
                           f"kernelzero_sandbox_gpu{device_index}.weights")
  os.makedirs(directory, exist_ok=True)
  need = 2 * max(0, int(weight_bytes))
  place = None
  with open(os.path.join(directory, "ledger.lock"), "a+") as ledger:
    fcntl.flock(ledger, fcntl.LOCK_EX)  # one judge at a time reads and adds to the ledger
    others = _kept_bytes(directory)
    if others + need <= share * gpu_bytes:
      place = tempfile.NamedTemporaryFile(  # pylint: disable=consider-using-with
          "w", dir=directory, prefix=f"{os.getpid()}.", suffix=".place", delete=False)
      fcntl.flock(place, fcntl.LOCK_EX)
      place.write(str(need))
      place.flush()
  try:
    yield place is not None, others
  finally:
    if place is not None:
      with contextlib.suppress(OSError):
        os.unlink(place.name)
      place.close()


def _kept_bytes(directory: str) -> int:
  """The bytes the live places of a weights ledger hold (weights_kept); dead holders' go."""
  kept = 0
  for name in os.listdir(directory):
    if not name.endswith(".place"):
      continue
    path = os.path.join(directory, name)
    try:
      with open(path) as f:
        if took(f, fcntl.LOCK_SH):  # its holder is gone (or let go between the listing and here)
          with contextlib.suppress(OSError):
            os.unlink(path)
          continue
        kept += int(f.read().strip() or 0)
    except (OSError, ValueError):
      continue
  return kept


def took(f, operation: int) -> bool:
  """Whether the lock `operation` (fcntl.LOCK_EX or LOCK_SH) on the open file `f` was taken,
  without waiting for it."""
  try:
    fcntl.flock(f, operation | fcntl.LOCK_NB)
  except BlockingIOError:
    return False
  return True


# The share of the host's memory that judges whose weights stay off the GPU (weights_kept_fit)
# may fill with their models on the CPU at once, each with three copies: its reference (kept
# there until its hold), the reference checks' second one and its worker's candidate. On an
# H200 machine (128 GiB), 16 judges of level-2 problem 59 (4 GiB of weights) at once had 5 of
# them killed by the kernel for memory.
HOST_WEIGHTS_SHARE = 0.5
HOST_MODEL_COPIES = 3


@contextlib.contextmanager
def host_memory_hold(weight_bytes: int, host_bytes: int, wait: bool = True):
  """One of the host-memory slots for a judge of large weights (HOST_WEIGHTS_SHARE), lock files
  as gpu_slots' are, so that such judges at once fit the host's memory. Yields the number of
  slots its size allows (at least 1), or 0 where `wait` is False and none was free. (Judges of
  problems with different weights count different numbers of slots over the same files: the
  smaller problem's bound holds only approximately beside a larger one's judges.)"""
  slots = max(1, int(HOST_WEIGHTS_SHARE * host_bytes) // (HOST_MODEL_COPIES * max(1, weight_bytes)))
  lock_dir = os.path.join(tempfile.gettempdir(), "kz_host_memory")
  os.makedirs(lock_dir, exist_ok=True)
  with gpu_slots(0, slots, exclusive=False, lock_dir=lock_dir, wait=wait) as held:
    yield slots if held else 0
