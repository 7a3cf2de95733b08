"""The judge's use of the GPU (a part of Judge, judge.py): its holds of the GPU's slots
(gpu_budget.py) and the start-up fence (gpu_fence.py) around its steps, the memory it frees
before it lets go or after a failure, and the moves of its models to the device.
"""

from __future__ import annotations

import contextlib
import functools
import time
from typing import Any, Callable

from kernelzero_jax.sandbox import gpu_budget
from kernelzero_jax.sandbox import host_registration
from kernelzero_jax.sandbox import worker_handle
from kernelzero_jax.sandbox.config import SandboxConfig


# Devices this process has warmed up (warm_up_device): once per process, since a judge process
# that serves several jobs (judge_host.py) keeps its kernels and cuBLAS handle.
WARMED_UP: set[str] = set()


def device_name(cfg: SandboxConfig, gpu_index: int) -> str:
  """The torch device a judge and its worker use ("cpu" or "cuda:N")."""
  return "cpu" if cfg.device == "cpu" else f"cuda:{int(gpu_index)}"


def warm_up_device(torch, problem, device) -> None:
  """Loads what a judge's first reference check would load under the GPU hold: the RNG's
  kernels, cuBLAS's handle and workspace, and torch.equal's kernels. On an H200, a matmul
  reference's first check took 0.14-0.18 s more than the next ones, 0.03-0.06 s more with this
  (benchmarks/first_run.py). A few kernels on 256 elements and small allocations, run beside
  the judge's own context start-up, which is driver work of the same kind and far more."""
  problem.make_inputs(lambda: [torch.rand(16, 16)], 0, device)
  one = torch.ones(16, 16, device=device)
  torch.mm(one, one)
  problem.inputs_unchanged([one], [one.clone()])
  if device.type == "cuda":
    torch.cuda.synchronize(device)


def moves_nothing(torch, model) -> bool:
  """Whether `model.to(device)` is no driver or GPU work: a module with no parameters or
  buffers whose class keeps nn.Module's own `to`, and whose submodules' classes its `_apply`
  (a reference's classes may be any code: one of their own could move anything)."""
  module = torch.nn.Module
  return (isinstance(model, module) and type(model).to is module.to
          and all(type(m)._apply is module._apply  # pylint: disable=protected-access
                  for m in model.modules())
          and next(model.parameters(), None) is None and next(model.buffers(), None) is None)


def drop_tracebacks(error: BaseException) -> None:
  """Drops the tracebacks of `error` and of every exception it chains to (its cause, its
  context). Their frames hold the failed step's locals, which on a GPU judge are its input sets
  and outputs: with the tracebacks gone, they go too."""
  seen: set[int] = set()
  chain: list[BaseException | None] = [error]
  while chain:
    e = chain.pop()
    if e is None or id(e) in seen:
      continue
    seen.add(id(e))
    e.__traceback__ = None
    chain += [e.__cause__, e.__context__]


class GpuSteps:
  """Judge's GPU holds, fence, memory and uploads. A mixin of Judge: the state it reads is
  Judge.__init__'s."""

  @contextlib.contextmanager
  def _gpu_hold(self, slots: int, exclusive: bool, width: int = 1, wait: bool = True):
    """gpu_budget.gpu_slots, with the time spent waiting for them added up in
    stage_seconds["gpu_wait"]. Yields whether the GPU is held (see gpu_slots' `wait`)."""
    t0, asked_at = time.perf_counter(), time.time()
    with gpu_budget.gpu_slots(self.device.index or 0, slots, exclusive, width=width,
                              wait=wait, timings_first=self.cfg.timings_first) as held:
      if not held:
        yield False
        return
      stages = self.verdict.stage_seconds
      stages["gpu_wait"] = round(stages.get("gpu_wait", 0.0) + time.perf_counter() - t0, 3)
      got_at, alone = round(time.time(), 3), exclusive or slots == 1
      if alone:  # when it asked for the slots, and when it got them (the hold's start)
        self.verdict.evidence.setdefault("alone_asked", []).append([round(asked_at, 3), got_at])
      # Wall-clock bounds of every hold and the slots it took, so that a run's holds can be
      # laid side by side (how many judges had the GPU at once, for how long one had it alone,
      # how many slots the shared checks took: benchmarks/gpu_steps.py).
      hold = [got_at, None, "alone" if alone else "shared",
              gpu_budget.slots_taken(slots, exclusive, width)]
      self.verdict.evidence.setdefault("gpu_holds", []).append(hold)
      try:
        yield True
      finally:
        hold[1] = round(time.time(), 3)

  def _gpu_free_now(self) -> bool:
    """Whether every slot of the GPU is free at this moment (taken and given back at once)."""
    with gpu_budget.gpu_slots(self.device.index or 0, self.cfg.gpu_concurrency, True,
                              wait=False, timings_first=self.cfg.timings_first) as free:
      return free

  @contextlib.contextmanager
  def _fence(self, name: str, timing: bool, holding_gpu: bool = False, slot: bool = True):
    """gpu_fence.startup_fence around a start-up step or a timing of a GPU judge, with the
    seconds it waited in evidence["fence_wait_s"][name] (summed over repeats). `holding_gpu`:
    a timing within a hold of every slot (gpu_fence's docstring: it must not wait). `slot`: a
    start-up that creates a CUDA context, which takes one of the start-up slots."""
    if self.cfg.device != "cuda" or not self.cfg.startup_fence or self._fence_held:
      yield  # (held already: a timing's steps within a timing's hold)
      return
    from kernelzero_jax.sandbox import gpu_fence  # pylint: disable=import-outside-toplevel
    slots = self.cfg.startups_at_once if slot else 0
    with gpu_fence.startup_fence(self.job.get("gpu_index", 0), timing,
                                 holding_gpu=holding_gpu, startup_slots=slots) as waited, \
        self._in_fence(name, waited):
      yield

  @contextlib.contextmanager
  def _fence_within(self, name: str, patience_s: float):
    """gpu_fence.timing_fence_within for a timing that need not happen now, taken before the
    GPU: yields whether the fence is held (always where no fence is kept), with the seconds it
    waited in evidence["fence_wait_s"][name] as _fence's."""
    if self.cfg.device != "cuda" or not self.cfg.startup_fence or self._fence_held:
      yield True
      return
    from kernelzero_jax.sandbox import gpu_fence  # pylint: disable=import-outside-toplevel
    with gpu_fence.timing_fence_within(self.job.get("gpu_index", 0), patience_s) as waited:
      if waited is None:
        yield False
        return
      with self._in_fence(name, waited):
        yield True

  @contextlib.contextmanager
  def _in_fence(self, name: str, waited: float):
    """The fence taken (_fence, _fence_within): the wait added up in
    evidence["fence_wait_s"][name], the hold's wall-clock bounds in evidence["fence_holds"]
    ([name, from, to]: benchmarks/gpu_steps.py lays them beside the GPU's holds), and timings
    inside it do not take it again."""
    evidence = self.verdict.evidence
    waits = evidence.setdefault("fence_wait_s", {})
    waits[name] = round(waits.get(name, 0.0) + waited, 4)
    self._fence_held, held_from = True, time.time()
    try:
      yield
    finally:
      self._fence_held = False
      evidence.setdefault("fence_holds", []).append(
          [name, round(held_from, 3), round(time.time(), 3)])

  def _open_setup_window(self, kind: str) -> None:
    """A GPU judge opens a window (setup_windows.open_window) before its worker runs candidate
    code of `kind` outside every hold: "import" (from the go, or the worker's start where it
    imports at once), "constructor"."""
    if self.cfg.device != "cuda" or kind in self._setup_windows:
      return
    from kernelzero_jax.sandbox import setup_windows  # pylint: disable=import-outside-toplevel
    try:
      self._setup_windows[kind] = setup_windows.open_window(self.job.get("gpu_index", 0), kind)
    except OSError as e:
      self.verdict.evidence.setdefault("setup_window_errors", []).append(str(e)[:200])

  def _close_setup_window(self, kind: str, reply: Any) -> None:
    """Closes the window of `kind` with the kernel time of the worker's `reply` (its profile of
    that code, worker_build._outside_the_hold; none there: no kernels seen), or unknown where
    no reply came (the worker died or hung: None)."""
    handle = self._setup_windows.pop(kind, None)
    if handle is None:
      return
    from kernelzero_jax.sandbox import setup_windows  # pylint: disable=import-outside-toplevel
    kernel_ms = None
    if isinstance(reply, dict):
      setup = reply.get("setup_gpu")
      got = setup.get("kernel_ms") if isinstance(setup, dict) else None
      kernel_ms = float(got) if worker_handle.finite_number(got) and got >= 0 else 0.0
    setup_windows.close_window(handle, kernel_ms)

  def _timing_disturbed(self, start: float, end: float, retimed: bool,
                        after_forward: dict[str, float] | None = None, wait: bool = True) -> bool:
    """Whether the timing this judge made from `start` to `end` (time.time(): Judge.timing_span)
    was disturbed: measured more than SandboxConfig.retime_after_forward_ms past a forward's end
    (`after_forward`, where given: _stretched_timings), the mark another GPU context's work
    leaves. Such a timing goes to evidence["timing_disturbed"], with the time it measured,
    whether it is made again (`retimed`), and the setup windows with kernels that overlapped it
    (setup_windows.disturbances, which waits up to SandboxConfig.setup_window_wait_s for those
    still open: "unresolved"); so does an undisturbed one that such windows overlapped, for
    reading (on an H100, 41 such timings measured their copies' times; the 22 stretched ones
    2.1-5.7x). Without `wait` (under a hold: _timed_in_hold) nothing is waited for, and only a
    disturbed timing is told: the caller looks again after its hold."""
    if self.cfg.device != "cuda":
      return False
    from kernelzero_jax.sandbox import setup_windows  # pylint: disable=import-outside-toplevel
    found = setup_windows.disturbances(self.job.get("gpu_index", 0), start, end,
                                       self.cfg.setup_window_wait_s if wait else 0.0)
    evidence = self.verdict.evidence
    evidence["setup_window_wait_s"] = round(evidence.get("setup_window_wait_s", 0.0)
                                            + found["waited_s"], 3)
    stretched = self._stretched_timings(after_forward)
    if not stretched and not (wait and (found["disturbing"] or found["unresolved"])):
      return False
    evidence.setdefault("timing_disturbed", []).append({
        "candidate_ms": self.verdict.candidate_ms, "reference_ms": self.verdict.reference_ms,
        "held_s": round(end - start, 3), "windows": found["disturbing"][:4],
        "unresolved": found["unresolved"][:4], "after_forward_ms": stretched,
        "retimed": bool(stretched) and retimed})
    return bool(stretched)

  def _stretched_timings(self, after_forward: dict[str, float] | None) -> dict[str, float]:
    """The timings among `after_forward` (the median ms each measured past its forward's end on
    its stream: Judge._timing's evidence) over SandboxConfig.retime_after_forward_ms: another
    context's time slice (2.386 ms on an H200 and an H100 beside busy_at_import's kernels, or
    4.6 and 6.9 ms, two and three slices) or a host that woke late, whatever their source.
    The candidate's is its worker's word, read only as a reason to time again and, left so, to
    report no speedup: a candidate that claims it gains nothing."""
    limit = self.cfg.retime_after_forward_ms
    if limit is None or not after_forward:
      return {}
    return {side: ms for side, ms in after_forward.items() if ms > limit}

  @contextlib.contextmanager
  def _step(self, name: str):
    """Adds the seconds of the enclosed work to self.steps[name], also when it fails."""
    t0 = time.perf_counter()
    try:
      yield
    finally:
      self.steps[name] = round(self.steps.get(name, 0.0) + time.perf_counter() - t0, 4)
      self.verdict.evidence["gpu_seconds"] = dict(self.steps)

  def _holding(self, *steps: Callable[[], Any]) -> None:
    """Runs `steps` in turn under the GPU hold its caller holds. A failure there ends the
    evaluation, and what the evaluation still has on the GPU goes before the hold does
    (_give_back_after_failure). Otherwise it would stay, in no hold and counted by no memory
    budget, until this process's next job, or through a whole new evaluation where a kept
    worker's failure is judged again here (Judge.run): on an H200, judges held 19-31 GiB so and
    candidates beside them ran out of memory (BENCHMARKS.md)."""
    try:
      for step in steps:
        step()
      return
    except BaseException as error:  # pylint: disable=broad-except
      failure = error
    # Out of the except clause, the failure's traceback is all that holds the failed steps'
    # frames (a with statement's exit would still hold it: hence a function, not a context).
    drop_tracebacks(failure)
    self._give_back_after_failure()
    raise failure

  def _give_back_after_failure(self) -> None:
    """After a failure under a hold, before it ends: the worker is killed (its candidate's memory
    goes with its CUDA context; this judge's views of its outputs went with the failure's
    frames), and this judge's reference model and cached blocks are freed. (A kept worker
    still looking itself over, _take_worker, holds no candidate's memory: it goes at the end of
    the job.)"""
    if self.worker is not None:
      self.worker.kill()
      self.worker = None
    self.ref_model = None
    if self.device is not None and self.device.type == "cuda":
      self.torch.cuda.empty_cache()

  def _release_gpu_memory(self) -> None:
    """Frees the GPU memory of the last check's (or timing's) inputs and outputs in this judge
    and its worker (Worker.release), this judge's first: its CUDA IPC views of the worker's
    outputs must be gone for the worker to free them. What each still has allocated after it
    goes to evidence["left_after_release"], [judge bytes, worker bytes] per release."""
    with self._step("release"):
      self.torch.cuda.empty_cache()
      reply = self._expect(self.worker.request({"cmd": "release"}, self.cfg.correctness_timeout_s,
                                               "release"), "release")
      worker_bytes = reply.get("allocated_bytes")
      self.verdict.evidence.setdefault("left_after_release", []).append(
          [self.torch.cuda.memory_allocated(self.device),
           worker_bytes if isinstance(worker_bytes, int) else None])

  @functools.cached_property
  def _memory_on_gpu(self) -> tuple[dict[str, int | None], int, int]:
    """(one check's memory: {"input_bytes", "output_bytes", "check_bytes"}, the last None when
    the input size is unknown, and the model's "weight_bytes"; the GPU's bytes; the judges of the
    pool on it), what gpu_budget's memory model (checks_fit, weights_kept_fit) counts: read once,
    for _check_width, _keeps_memory and _weights_apart. (Read before the reference's second
    construction starts: that thread reseeds torch, and nothing may draw numbers beside it.)"""
    ref = self.ref_mod
    inputs = self.problem.input_bytes(ref.get_inputs)
    outputs = (None if inputs is None else
               self.problem.output_bytes(ref.Model, ref.get_init_inputs, ref.get_inputs))
    sizes = {"input_bytes": inputs, "output_bytes": outputs,
             "check_bytes": None if inputs is None else gpu_budget.check_bytes(inputs, outputs),
             "weight_bytes": self.problem.weight_bytes(ref.Model, ref.get_init_inputs)}
    total = self.torch.cuda.get_device_properties(self.device).total_memory
    return sizes, total, max(1, int(self.job.get("judges_on_gpu") or 1))

  def _check_width(self, slots: int) -> int:
    """How many of the `slots` this judge's checks hold (gpu_budget.check_width), beside the
    processes of the pool's other judges on this GPU (evidence["check_width"];
    evidence["checks_alone"] when that is all of them, as it is for any more than one without
    SandboxConfig.wide_checks). Unknown input sizes take one."""
    sizes, total, judges = self._memory_on_gpu
    if sizes["check_bytes"] is None:
      return 1
    width = gpu_budget.check_width(sizes["check_bytes"], slots, total, judges)
    if width > 1 and not self.cfg.wide_checks:
      width = slots
    if width > 1:
      self.verdict.evidence["checks_alone" if width == slots else "check_width"] = {
          **sizes, "slots": slots, "width": width, "gpu_bytes": total, "judges_on_gpu": judges}
    return width

  def _keeps_memory(self, slots: int) -> bool:
    """Whether this judge keeps its checks' memory between its holds
    (gpu_budget.memory_kept_fits, with SandboxConfig.keep_memory_between_holds;
    evidence["memory_kept_between_holds"])."""
    if not self.cfg.keep_memory_between_holds:
      return False
    sizes, total, judges = self._memory_on_gpu
    if sizes["check_bytes"] is None or not gpu_budget.memory_kept_fits(
        sizes["check_bytes"], slots, total, judges):
      return False
    self.verdict.evidence["memory_kept_between_holds"] = {
        **sizes, "slots": slots, "gpu_bytes": total, "judges_on_gpu": judges}
    return True

  @functools.cached_property
  def _weights_apart(self) -> bool:
    """Whether this judge's problem has weights too large to keep on a GPU between holds
    (evidence["weights_apart"]): then its reference stays on the CPU until its candidate's
    hold, and everything runs in that one hold of the whole GPU, the worker (and its model)
    killed in it. Too large where the weights the judges on the GPU keep now and these would
    not fit (gpu_budget.weights_kept, SandboxConfig.weights_ledger), or, without the ledger,
    where every judge on it could not keep as much (gpu_budget.weights_kept_fit)."""
    if self.device is None or self.device.type != "cuda":
      return False
    sizes, total, judges = self._memory_on_gpu
    weights = sizes["weight_bytes"]
    if not weights:  # unknown, or none
      return False
    if self.cfg.weights_ledger:
      place = contextlib.ExitStack()
      kept, others = place.enter_context(
          gpu_budget.weights_kept(self.device.index or 0, weights, total,
                                  share=self.cfg.weights_kept_share))
      if kept:  # given back when the evaluation ends (Judge.run)
        self._weights_place = place
        return False
      place.close()
      self.verdict.evidence["weights_apart"] = {"weight_bytes": weights, "gpu_bytes": total,
                                                "kept_by_others_bytes": others}
      return True
    if gpu_budget.weights_kept_fit(weights, total, judges, self.cfg.weights_kept_share):
      return False
    self.verdict.evidence["weights_apart"] = {"weight_bytes": weights, "gpu_bytes": total,
                                              "judges_on_gpu": judges}
    return True

  def _give_weights_place_back(self) -> None:
    """The end of an evaluation that kept its weights on the GPU (_weights_apart's ledger place):
    its reference's memory given back to the driver before the place goes. (Its worker's model
    went with the worker, or with its "drop" where the worker is kept.)"""
    if self._weights_place is None:
      return
    self.ref_model = self.second_reference = None
    self.torch.cuda.empty_cache()  # (set by _evaluate, as the place is)
    self._weights_place.close()
    self._weights_place = None

  def _take_host_memory(self) -> None:
    """Waits for a host-memory slot (gpu_budget.host_memory_hold) before this judge builds its
    large models on the CPU; kept until its evaluation ends (_run)."""
    import psutil  # pylint: disable=import-outside-toplevel
    t0 = time.perf_counter()
    self._host_memory = contextlib.ExitStack()
    slots = self._host_memory.enter_context(gpu_budget.host_memory_hold(
        self._memory_on_gpu[0]["weight_bytes"], psutil.virtual_memory().total))
    self.verdict.evidence["weights_apart"].update(
        host_slots=slots, host_wait_s=round(time.perf_counter() - t0, 3))

  def _register_ahead(self) -> None:
    """Before the first hold, under the start-up fence: the pages of the models that move to the
    GPU in it, page-locked now (host_registration.register_ahead; SandboxConfig.
    register_uploads_ahead), so that the hold keeps only their copies: the reference kept on the
    CPU (_weights_apart), and the candidate's, in its worker ("register", before its "init").
    Only where the reference's weights have host_registration.MIN_BYTES (the candidate's are
    the same parameters, built from the same init inputs)."""
    cfg = self.cfg
    if not (cfg.register_uploads_ahead and cfg.registered_uploads):
      return
    weight_bytes = self._memory_on_gpu[0]["weight_bytes"]
    if weight_bytes is None or weight_bytes < host_registration.MIN_BYTES:
      return
    with self._step("register_ahead"), self._fence("upload", timing=False, slot=False):
      if self._reference_on_cpu:
        self._reference_ahead = host_registration.register_ahead(self.torch, self.ref_model,
                                                                 self.device)
      self._expect(self.worker.request({"cmd": "register"}, cfg.correctness_timeout_s, "init"),
                   "init")

  def _upload_reference(self) -> None:
    """Under the hold, a reference kept on the CPU so far (_weights_apart, or
    SandboxConfig.reference_upload_in_hold) goes to the GPU."""
    if self._reference_on_cpu:
      with self._step("reference_upload"):
        ahead, self._reference_ahead = self._reference_ahead, None
        self.ref_model = self._to_device(self.ref_model, "reference", ahead)
        if self.device.type == "cuda":
          self.torch.cuda.synchronize(self.device)
      self._reference_on_cpu = False

  def _reference_waits_for_a_hold(self, model) -> bool:
    """Whether the reference built at start-up stays on the CPU until this judge's first hold
    (_upload_reference): where its weights are kept off the GPU between holds
    (_weights_apart), and on a GPU with SandboxConfig.reference_upload_in_hold where it has
    anything to move."""
    return self._weights_apart or (self.cfg.reference_upload_in_hold
                                   and self.device.type == "cuda"
                                   and not moves_nothing(self.torch, model))

  def _upload_at_start(self, model):
    """The reference built at start-up, moved to the device under the start-up fence, apart
    from timings (without a start-up slot: those are for context creations, gpu_fence.py, and
    this process's context exists; in a batch of 70 on an H200, uploads of small models waited
    7-10 s for a slot behind workers' context creations, to hold it for milliseconds). Not
    under the fence where the move is no driver or GPU work: a module with no parameters or
    buffers, moved by nn.Module's own `to` (SandboxConfig.fence_empty_uploads)."""
    if not self.cfg.fence_empty_uploads and moves_nothing(self.torch, model):
      return model.to(self.device)  # (nothing to register or to synchronize either)
    with self._fence("upload", timing=False, slot=False):
      moved = self._to_device(model, "reference")
      if self.device.type == "cuda":
        self.torch.cuda.synchronize(self.device)
    return moved

  def _to_device(self, model, name: str, ahead=None):
    """`model` moved to this judge's device; from its own pages page-locked in place where it
    is large and SandboxConfig.registered_uploads (host_registration.py;
    evidence["registered_upload"][name]), those registered `ahead` where given."""
    moved, upload = host_registration.to_device(self.torch, model, self.device,
                                                enabled=self.cfg.registered_uploads, ahead=ahead)
    if upload:
      self.verdict.evidence.setdefault("registered_upload", {})[name] = upload
    return moved
