"""What a judge measures about the reference (a part of Judge, judge.py): its outputs on each
input set, its checks for references that cannot tell candidates apart (verdict.degenerate), and
its time; measured before the candidate runs where the GPU is free then (_reference_first), and
shared with the other judges of the same reference (read_facts, share_facts).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import statistics
import threading
import time
from typing import Any

from kernelzero_jax import atomic_file
from kernelzero_jax.sandbox import verdict as V
from kernelzero_jax.sandbox import worker_handle
from kernelzero_jax.sandbox.worker_handle import StageFailure


# How long _reference_first waits for the reference's second construction (a thread, which
# reseeds torch) before it gives up measuring first: the worker waits for its go meanwhile.
REFERENCE_FIRST_WAIT_S = 0.5
# How long _reference_first waits for start-ups under way to leave the fence before it times the
# reference (holding nothing of the GPU meanwhile); it measures after the candidate's checks
# instead where they take longer. (Such waits were 0.3-1.4 s in a batch of 259 on an H100.) The
# worker waits for its go meanwhile, as it did while the judge waited with the GPU held.
REFERENCE_FIRST_FENCE_S = 1.0
# A Triton judge that times the reference first builds the reference's second model after that
# timing instead of before it, when building the first took at least this long: the timing then
# need not wait for it (it reseeds torch), and it runs beside the worker's import of the
# candidate; the reference checks that use it follow under the candidate's hold. (On an H200, a
# lone level-2 Triton candidate's reference waited 0.4-0.6 s for it: the timing, and the worker's
# go after it, that much later.)
SECOND_REFERENCE_AFTER_S = 0.2


def read_facts(path: str) -> dict[str, Any]:
  """The reference facts judges shared in `path` ({} if none yet, or unreadable)."""
  try:
    with open(path) as f:
      facts = json.load(f)
  except (OSError, ValueError):
    return {}
  return facts if isinstance(facts, dict) else {}


def share_facts(path: str, facts: dict[str, Any]) -> None:
  """Adds `facts` to the file at `path`, which judges of one reference share (SandboxPool); a
  fact already there stays, as the first measurement of it. Judges are trusted processes, and
  the file lies outside every candidate's directory, where a candidate cannot write. Sharing is
  an optimisation: if it fails (e.g. the pool was closed meanwhile), later judges measure."""
  try:
    with open(path + ".lock", "a+") as lock:
      fcntl.flock(lock, fcntl.LOCK_EX)
      merged = read_facts(path)
      for name, value in facts.items():
        merged.setdefault(name, value)
      atomic_file.write_json(path, merged)
  except OSError:
    pass


class ReferenceSteps:
  """Judge's measurements of the reference. A mixin of Judge: the state it reads is
  Judge.__init__'s."""

  def _knows(self, fact: str) -> bool:
    """Whether `fact` about the reference is known: shared by another judge by now."""
    if fact not in self.known and self.facts_path:
      self.known = {**read_facts(self.facts_path), **self.known}
    return fact in self.known

  def _reference_to_check(self) -> bool:
    """Whether the reference checks are this judge's to run: not run here, none shared by now."""
    return (self.cfg.check_degenerate and not self.reference_checked
            and not self._knows("degenerate"))

  def _reference_to_time(self) -> bool:
    """Whether the reference's time is this judge's to measure: not timed here, none shared."""
    cfg = self.cfg
    return (cfg.timing and cfg.device == "cuda" and self.reference_timed is None
            and not self._knows("reference_ms"))

  def _reference_unmeasured(self) -> bool:
    """Whether this judge has a fact about the reference to measure."""
    return self._reference_to_check() or self._reference_to_time()

  def _start_second_reference(self) -> None:
    """The reference checks build the reference a second time (to see that it reproduces
    itself). On the CPU, KernelBench's way, that can take seconds (4 GiB of nn.Linear: 9 s on
    an H200 machine), so it is done in a thread while the candidate builds, unless another judge
    has shared the checks' findings by now; the judge joins it before it takes the GPU, and
    before anything of its own draws random numbers (construct_model reseeds torch)."""
    if not self.cfg.check_degenerate or self._knows("degenerate"):
      return

    def construct() -> None:
      try:
        self.second_reference = self.problem.construct_model(
            self.ref_mod.Model, self.ref_mod.get_init_inputs, self.cfg.init_seed)
      except Exception:  # pylint: disable=broad-except
        pass  # the reference checks build it again, and fail there as they would have
    self._second_reference_thread = threading.Thread(target=construct, daemon=True)
    self._second_reference_thread.start()

  def _second_reference_after(self, construct_s: float) -> bool:
    """Whether the reference's second model is built after _reference_first's timing rather
    than before it (SECOND_REFERENCE_AFTER_S): only where that timing comes first and nothing
    else holds the go meanwhile (a CUDA worker's prebuilder takes seconds, which the second
    construction fits in), only where this judge has both the reference's time and its checks
    to measure, and only where building the first took long."""
    if os.environ.get("KZ_SECOND_REFERENCE_AFTER", "1") == "0":  # (benchmarks: before, as was)
      return False
    return (self.awaits_go and self.prebuilder is None and not self._weights_apart
            and construct_s >= SECOND_REFERENCE_AFTER_S and self._reference_to_time()
            and self._reference_to_check())

  def _reference_first(self, checks: bool = True) -> None:
    """What this judge measures about the reference (its timing, then its checks), measured
    before the candidate's checks, if the GPU is free now: a judge that would wait for it
    measures after the candidate's checks as before. The reference is timed only while the
    worker still waits for its go, set up and without the candidate's code imported, so that
    nothing of the candidate runs in a process with a GPU meanwhile (its precompiler or
    prebuilder has none; go_gate.py); the untimed checks follow while the worker imports it
    (evidence["reference_first"]), unless not `checks`: then they wait for the reference's
    second model, built after this timing (_second_reference_after), until the candidate's hold."""
    cfg, torch = self.cfg, self.torch
    t0 = time.perf_counter()
    evidence = self.verdict.evidence["reference_first"] = {"held": False, "timed": False}
    try:
      if self._weights_apart:  # its reference is uploaded under the candidate's hold
        evidence["skipped"] = "the reference's weights stay off the GPU until the candidate's hold"
        return
      construct = self._second_reference_thread
      if construct is not None:  # it reseeds torch: nothing here may draw random numbers before
        self._join_second_reference(construct)
      if construct is not None and construct.is_alive():
        evidence["skipped"] = "the reference's second construction was still running"
        return
      base = self.base_seed
      fence = contextlib.ExitStack()
      # The fence before the GPU, and only where the GPU is free now: waiting for start-ups
      # with every slot held would leave the GPU idle (gpu_fence.timing_fence_within).
      free = self._reference_to_time() and self._gpu_free_now()
      fenced = free and fence.enter_context(self._fence_within("reference_first",
                                                               REFERENCE_FIRST_FENCE_S))
      if free and not fenced:
        evidence["untimed"] = (f"start-ups held the fence past {REFERENCE_FIRST_FENCE_S} s, "
                               "or another timing held it")

      def measure() -> None:
        evidence["held"] = True
        self._upload_reference()  # (where it waited for a hold: reference_upload_in_hold)
        if fenced and self._reference_to_time() and self.go_gate.claim():
          try:
            started = time.time()
            self.reference_timed = self._time_reference(self._timing_seeds(base))
            self.timing_span = (started, time.time())
            evidence["timed"] = True
          finally:
            self.go_gate.release()
        fence.close()  # the checks need no fence: start-ups may go on beside them
        self._let_triton_worker_go()
        if not checks:
          evidence["checks"] = "after the second construction, under the candidate's hold"
        elif self._reference_to_check():
          if self._fused_thread is not None and not self._fused_thread.is_alive():
            self._ready_fused_compare()  # compiled by now: the checks compare in one kernel
          self._degenerate_facts(self._check_seeds(base))
        torch.cuda.empty_cache()

      with fence, self._gpu_hold(cfg.gpu_concurrency, exclusive=True, wait=False) as held:
        if held:
          self._holding(measure)
      # Disturbed (too long past the forward's end, as beside another candidate's kernels
      # outside every hold): timed again under the candidate's timing hold instead.
      if evidence["timed"]:
        after = (self.reference_timed or {}).get("after_forward_ms")
        if self._timing_disturbed(*self.timing_span, retimed=True, after_forward=(
            {"reference": float(after)} if isinstance(after, (int, float)) else None)):
          self.reference_timed, evidence["timed"] = None, False
    finally:
      self._let_triton_worker_go()
      evidence["seconds"] = round(time.perf_counter() - t0, 3)

  def _join_second_reference(self, construct: threading.Thread) -> None:
    """Waits for the reference's second construction before _reference_first: up to
    REFERENCE_FIRST_WAIT_S, or for as long as a CUDA worker still waits for its prebuilder's
    hand-over (seconds of build), which it does whatever this judge does. (On an H200, lone
    level-2 CUDA candidates' judges gave up at 0.5 s and timed the reference under the
    candidate's hold instead, 0.3 s longer there.)"""
    deadline = time.perf_counter() + REFERENCE_FIRST_WAIT_S
    while construct.is_alive():
      construct.join(worker_handle.POLL_S)
      if time.perf_counter() >= deadline and not self._prebuild_holds_the_go():
        return

  def _degenerate_facts(self, seeds: list[int]) -> None:
    """The reference checks' findings (verdict.degenerate), once per judge: shared by another
    judge, or measured here and shared at once, before this judge lets go of the GPU (the next
    judge reads them)."""
    v = self.verdict
    if self.reference_checked:
      return
    self.reference_checked = True
    v.stage = "reference_checks"
    if self._knows("degenerate"):
      v.degenerate = list(self.known["degenerate"])
      v.evidence.setdefault("reference_reused", []).append("degenerate")
    else:
      with self._step("reference_checks"):
        self._reference_checks(seeds[:2])
    v.reference_facts["degenerate"] = list(v.degenerate)
    if self.facts_path:
      share_facts(self.facts_path, v.reference_facts)

  def _reference_checks(self, seeds: list[int]) -> None:
    """Flags references that cannot discriminate candidates, before any candidate runs:
    outputs that are not finite, outputs that a constant (all zeros, or their mean) passes on
    every checked input set, and references that do not reproduce themselves from their seeds
    under a different random state (e.g. active dropout)."""
    torch, v, problem = self.torch, self.verdict, self.problem
    constant_everywhere = True
    first_refs = None
    for seed in seeds:
      refs, _, _ = self._reference(seed)
      tensors = [r for r in refs if isinstance(r, torch.Tensor) and r.is_floating_point()]
      if any(not torch.isfinite(r).all() for r in tensors):
        if V.DEGENERATE_NONFINITE not in v.degenerate:
          v.degenerate.append(V.DEGENERATE_NONFINITE)
      passes = False
      for fill in ("zeros", "mean"):
        ok = bool(tensors)
        for r in tensors:
          atol, rtol = self.cfg.tolerance_for(str(r.dtype).replace("torch.", ""))
          value = 0.0 if fill == "zeros" else problem.mean_float64(r)
          ok = ok and problem.constant_passes(r, value, atol, rtol)
        passes = passes or ok
      constant_everywhere = constant_everywhere and passes
      if first_refs is None:
        first_refs = refs
      del refs
    if constant_everywhere:
      v.degenerate.append(V.DEGENERATE_CONSTANT)
    second, self.second_reference = self.second_reference, None
    if second is None:  # (its construction in a thread failed, or none was started)
      second = problem.construct_model(self.ref_mod.Model, self.ref_mod.get_init_inputs,
                                       self.cfg.init_seed)
    model = self._to_device(second, "second_reference")
    del second
    inputs = problem.make_inputs(self.ref_mod.get_inputs, seeds[0], self.device)
    torch.manual_seed(seeds[0] + 0x5EED)  # a different random state for the forward itself
    again = problem.flatten(model(*inputs))
    ok, _, _, _ = problem.compare_outputs(again, first_refs, self.cfg.tolerance_for,
                                          self.close_stats)
    if not ok:
      v.degenerate.append(V.DEGENERATE_NONDETERMINISTIC)
    del model, inputs, again, first_refs
    if self.device.type == "cuda":  # the checks that follow, and other judges', need it more
      torch.cuda.empty_cache()

  def _reference(self, seed: int, copy: bool = False) -> tuple[list, list, list | None]:
    """(the reference's outputs on input set `seed`, those inputs as its forward left them, and
    with `copy` a copy of them as made, else None)."""
    problem = self.problem
    with self._input_set_timed():
      inputs = problem.make_inputs(self.ref_mod.get_inputs, seed, self.device)
    pristine = problem.clone_leaves(inputs) if copy else None
    try:
      out = self.ref_model(*inputs)
    except Exception as e:  # pylint: disable=broad-except
      self.verdict.reference_error = True
      raise StageFailure(V.RUNTIME_ERROR, f"reference forward failed: {type(e).__name__}: {e}")
    return problem.flatten(out), inputs, pristine

  @contextlib.contextmanager
  def _input_set_timed(self):
    """Times the making of an input set: on a GPU between two CUDA events (nothing waits for
    them; input_set_ms reads them once the checks are done), on the CPU by the clock. The
    judge's own measure of what a fresh set costs the candidate's timing trials, which make
    theirs in the worker (the worker's own account, evidence["timing_loop_ms"], is only its
    launch: the GPU's work goes on after)."""
    if self.device.type == "cuda":
      start, end = (self.torch.cuda.Event(enable_timing=True) for _ in range(2))
      start.record()
      yield
      end.record()
      self.input_set_times.append((start, end))
    else:
      t0 = time.perf_counter()
      yield
      self.input_set_times.append(1000.0 * (time.perf_counter() - t0))

  def _record_input_set_ms(self) -> None:
    """evidence["input_set_ms"]: the median time this judge took to make an input set (ms),
    from the sets _reference made; once every one is done (after the last check)."""
    made, self.input_set_times = self.input_set_times, []
    times = []
    for t in made:
      if isinstance(t, float):
        times.append(t)
      else:
        t[1].synchronize()  # (done already: the last check's comparison waited for the GPU)
        times.append(t[0].elapsed_time(t[1]))
    if times:
      self.verdict.evidence["input_set_ms"] = round(statistics.median(times), 4)

  def _time_reference(self, seeds: list[int]) -> dict[str, Any]:
    """Times the reference (and torch.compile's, if asked) into the verdict; returns
    timing.time_forward's summary of the reference."""
    from kernelzero_jax.sandbox import timing  # pylint: disable=import-outside-toplevel
    cfg, v = self.cfg, self.verdict
    # The timer's L2-flush buffer (256 MB) is needed only when the reference is timed here.
    with self._step("reference_timing"), self._fence("reference_timing", timing=True,
                                                     holding_gpu=True):
      timer = timing.Timer(self.device)
      make = lambda s: self.problem.make_inputs(self.ref_mod.get_inputs, s, self.device)
      ref = timing.time_forward(timer, self.ref_model, make, seeds, cfg.warmup,
                                cfg.timing_target_s, cfg.min_trials,
                                reuse_inputs=cfg.reference_reuses_inputs,
                                precision=cfg.timing_precision)
    v.reference_ms = ref["median_ms"]
    if ref.get("input_sets") is not None:  # (timing.time_forward's; made again if changed)
      v.evidence["reference_input_sets"] = ref["input_sets"]
    if cfg.compare_torch_compile:
      try:
        compiled = self.torch.compile(self.ref_model)
        comp = timing.time_forward(timer, compiled, make, seeds, cfg.warmup,
                                   cfg.timing_target_s, cfg.min_trials,
                                   reuse_inputs=cfg.reference_reuses_inputs,
                                   precision=cfg.timing_precision)
        v.compile_ms = comp["median_ms"]
      except Exception as e:  # pylint: disable=broad-except
        v.reasons.append(f"torch.compile baseline failed: {type(e).__name__}: {e}"[:300])
    if self.device.type == "cuda":
      # Its input set and outputs stayed in torch's cache, where the candidate's timing after
      # it could not use them: on an H100 beside 23 judges, 15 GiB of a 7 GiB problem's left
      # that timing out of memory.
      self.torch.cuda.empty_cache()
    return ref
