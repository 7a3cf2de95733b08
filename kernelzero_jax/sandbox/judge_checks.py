"""The candidate's side of an evaluation (a part of Judge, judge.py): its outputs checked on
fresh input sets against the reference's (in one comparison kernel where it compiled:
fused_compare.py), its timing with audited calls, and its last check on unseen inputs.
"""

from __future__ import annotations

import itertools
import math
import os
import random
import threading
import time
from typing import Any

from kernelzero_jax.sandbox import judge_reference
from kernelzero_jax.sandbox import verdict as V
from kernelzero_jax.sandbox import worker_handle
from kernelzero_jax.sandbox.worker_handle import StageFailure


# What a worker's run reply may add to the verdict's evidence (worker_run.RunSteps.run), and
# its form: names, or counts by name.
WORKER_EVIDENCE = {"ops": list, "gpu_kernels": list, "own_kernels_ran": list,
                   "triton_launches": dict}


class CandidateSteps:
  """Judge's checks and timing of the candidate. A mixin of Judge: the state it reads is
  Judge.__init__'s."""

  def _start_fused_compare(self) -> None:
    """A thread that compiles the comparison kernel (fused_compare.py, about 0.3 s of one CPU
    core) while the candidate builds."""
    from kernelzero_jax.sandbox import fused_compare  # pylint: disable=import-outside-toplevel
    capability = self.torch.cuda.get_device_capability(self.device)
    built: dict[str, Any] = {}

    def compile_kernel() -> None:
      t0 = time.perf_counter()
      try:
        built["cubin"] = fused_compare.compile_cubin(capability)
      except Exception as e:  # pylint: disable=broad-except
        built["error"] = f"{type(e).__name__}: {e}"[:500]
      built["compile_s"] = round(time.perf_counter() - t0, 3)
    self._fused_built = built
    self._fused_thread = threading.Thread(target=compile_kernel, name="fused-compare",
                                          daemon=True)
    self._fused_thread.start()

  def _ready_fused_compare(self) -> None:
    """Loads the compiled kernel before the GPU is taken; if it did not compile or load, the
    comparisons go the torch way (evidence["fused_compare"]["error"])."""
    from kernelzero_jax.sandbox import fused_compare  # pylint: disable=import-outside-toplevel
    t0 = time.perf_counter()
    self._fused_thread.join()
    self._fused_thread = None  # once
    built = self._fused_built
    # The wait for the compile, and the module's load into this judge's context (driver work).
    evidence = self.verdict.evidence["fused_compare"] = {
        "compile_s": built["compile_s"], "join_s": round(time.perf_counter() - t0, 3)}
    if "cubin" not in built:
      evidence["error"] = built["error"]
      return
    t0 = time.perf_counter()
    try:
      self.close_stats = fused_compare.FusedCloseStats(self.device, built["cubin"])
    except Exception as e:  # pylint: disable=broad-except
      evidence["error"] = f"{type(e).__name__}: {e}"[:500]
    evidence["load_s"] = round(time.perf_counter() - t0, 3)

  def _check_seeds(self, base: int) -> list[int]:
    return [base + 1 + i for i in range(self.cfg.num_correct_trials)]

  def _timing_seeds(self, base: int) -> list[int]:
    return [base + 10_007 + i for i in range(self.cfg.warmup + self.cfg.max_trials)]

  def _checks(self, base: int) -> None:
    """Reference checks, the candidate's init, and its outputs on fresh input sets."""
    cfg, v = self.cfg, self.verdict
    seeds = self._check_seeds(base)
    if cfg.check_degenerate:
      self._degenerate_facts(seeds)
    v.stage = "init"
    with self._step("candidate_init"):
      inited = self._expect(self.worker.request({"cmd": "init", "seed": cfg.init_seed},
                                                cfg.correctness_timeout_s, "init"), "init")
    if inited.get("upload"):  # the worker's own account (host_registration.sanitize)
      from kernelzero_jax.sandbox import host_registration  # pylint: disable=import-outside-toplevel
      self.verdict.evidence.setdefault("registered_upload", {})["candidate"] = (
          host_registration.sanitize(inited["upload"]))
    v.stage = "correctness"
    t0 = time.perf_counter()
    for i, seed in enumerate(seeds):
      self._check_seed(seed, profile=(i == 0), stage="correctness")
      v.num_correct_trials += 1
    v.stage_seconds["correctness"] = round(time.perf_counter() - t0, 3)

  def _check_seed(self, seed: int, profile: bool, stage: str) -> None:
    """Runs the candidate on input set `seed` and checks it.

    The candidate's tensors are compared where they arrive (CUDA IPC views of the worker's
    memory, or copies on the CPU) without cloning: the worker is blocked until the next command,
    and any thread it might have started is reported as a violation in the reply itself.
    """
    cfg = self.cfg
    request = {"cmd": "run", "seed": seed, "profile": profile}
    # (benchmarks: each input set copied before the reference's forward, as was)
    copy = os.environ.get("KZ_INPUTS_AGAINST_REFERENCE", "1") == "0"
    pristine = None
    candidate_step = "candidate_profiled_run" if profile else "candidate_run"
    if cfg.concurrent_reference:
      # The reference's outputs for the same input set, computed while the worker runs (two
      # processes, nothing timed): the step records the wait for the worker that is left after.
      # A candidate's failure is reported before a reference's, as when they ran in turn.
      t0 = time.perf_counter()
      self.worker.send(request)
      reference_failure, flagged = None, self.verdict.reference_error
      with self._step("reference_run"):
        try:
          refs, ref_inputs, pristine = self._reference(seed, copy)
        except StageFailure as f:
          reference_failure, self.verdict.reference_error = f, flagged  # flagged if raised
      with self._step(candidate_step):
        remaining = cfg.correctness_timeout_s - (time.perf_counter() - t0)
        reply = self._expect(self.worker.wait(max(remaining, worker_handle.POLL_S), stage,
                                              cfg.correctness_timeout_s), stage)
      self._merge_evidence(reply.get("evidence", {}))
      if reference_failure is not None:
        self.verdict.reference_error = True
        raise reference_failure
    else:
      with self._step(candidate_step):
        reply = self._expect(self.worker.request(request, cfg.correctness_timeout_s, stage),
                             stage)
      self._merge_evidence(reply.get("evidence", {}))
      with self._step("reference_run"):
        refs, ref_inputs, pristine = self._reference(seed, copy)
    with self._step("compare"):
      self._outputs_and_inputs_checked(seed, reply["outputs"], reply["inputs_after"], refs,
                                       ref_inputs, stage, pristine)
      del ref_inputs, pristine, refs
    # The views of the worker's tensors let go of here (on a GPU, their CUDA IPC handles
    # closed), not somewhere in the next step.
    t0 = time.perf_counter()
    del reply
    worker_handle.add_seconds(
        self.verdict.evidence.setdefault("messages", {}).setdefault("run", {"n": 0}),
        "views_dropped_s", time.perf_counter() - t0)

  def _outputs_and_inputs_checked(self, seed: int, outputs: list, after: list, refs: list,
                                  ref_inputs: list, stage: str, pristine: list | None) -> None:
    """_inputs_kept, then _compare of the candidate's `outputs` with the reference's `refs`: a
    forward that changed its inputs in place is rejected for that, whatever its outputs.

    The lists `refs`, `ref_inputs` and `pristine` are emptied as soon as their tensors are no
    longer needed: the inputs before the outputs are compared, as before. Where the input set is
    to be made again (the two forwards left it unlike), the outputs are compared before that and
    `refs` emptied, so that the new set takes the reference outputs' place in GPU memory instead
    of coming on top of what a check had room for. (On an H100 with 32 judges, level 1 problem
    36's 7 GiB set, made again beside its reference's outputs, ran out of memory even with the
    GPU to itself, and a cheat that wrote into its input got `runtime_error`, flagged as the
    reference's, instead of `rejected`.)"""
    compared, failure = [], []

    def compare_first() -> None:
      compared.append(True)
      try:
        self._compare(outputs, refs, stage)
      except StageFailure as f:
        failure.append(f.with_traceback(None))  # (a traceback would keep refs' frame alive)
      refs.clear()

    self._inputs_kept(seed, after, ref_inputs, stage, pristine, before_making_again=compare_first)
    ref_inputs.clear()
    if pristine is not None:
      pristine.clear()
    if failure:
      raise failure[0]
    if not compared:
      self._compare(outputs, refs, stage)

  def _inputs_kept(self, seed: int, after: list, ref_inputs: list, stage: str,
                   pristine: list | None = None, before_making_again=None) -> None:
    """Rejects a candidate whose forward changed its inputs in place (`after`: the worker's
    input set `seed` after its forward) where the reference's forward leaves them as made.

    Compared first with the reference's own inputs after its forward (`ref_inputs`: the same set,
    made from the same seed on the same device), which are the inputs as made unless the
    reference changes them too. Only where the two differ is the set made again, to tell which
    forward changed it: a reference that changes its inputs lets the candidate do so as well.
    (So no copy of each input set is made for this, nor compared after every reference forward:
    for a 6 GiB input set, a copy, 6 GiB read and 6 written, and a comparison, 12 GiB read.)
    `pristine`: a copy of the set made before the reference's forward, compared with instead
    (the way this was done before, for benchmarks: KZ_INPUTS_AGAINST_REFERENCE=0).
    `before_making_again` is called, if given, just before the set is made again."""
    problem = self.problem
    if pristine is None:
      if not problem.inputs_unchanged(after, ref_inputs):
        return
      if before_making_again is not None:
        before_making_again()
      evidence = self.verdict.evidence
      evidence["inputs_made_again"] = evidence.get("inputs_made_again", 0) + 1
      pristine = problem.make_inputs(self.ref_mod.get_inputs, seed, self.device)
    if problem.inputs_unchanged(ref_inputs, pristine):
      return  # the reference changes its inputs in place
    changed = problem.inputs_unchanged(after, pristine)
    if changed:
      raise StageFailure(V.REJECTED, f"{stage}: forward changed its inputs in place "
                         f"({', '.join(changed)})")

  def _compare(self, outputs: list, refs: list, stage: str) -> None:
    ok, reasons, max_abs, max_rel = self.problem.compare_outputs(
        outputs, refs, self.cfg.tolerance_for, self.close_stats)
    v = self.verdict
    for name, val in (("max_abs_error", max_abs), ("max_rel_error", max_rel)):
      if math.isfinite(val):
        setattr(v, name, max(getattr(v, name) or 0.0, val))
    if not ok:
      raise StageFailure(V.INCORRECT, f"{stage}: " + "; ".join(reasons[:4]))

  def _merge_evidence(self, ev: Any) -> None:
    """Adds what a worker's run reply says it saw (WORKER_EVIDENCE: lists of names, counts by
    name) to the verdict's evidence. The worker shares its process with the candidate, so
    nothing else it sends is recorded, and what is recorded is coerced to names and counts: a
    reply may not write the judge's own evidence, nor make the judge fail on it."""
    if not isinstance(ev, dict):
      return
    store = self.verdict.evidence
    for key, form in WORKER_EVIDENCE.items():
      val = ev.get(key)
      if not isinstance(val, form):
        continue
      if form is list:
        store[key] = sorted(set(store.get(key, [])) | {str(x)[:200] for x in val})
      else:
        merged = dict(store.get(key, {}))
        for k, n in val.items():
          if isinstance(n, int) and not isinstance(n, bool):
            merged[str(k)[:200]] = merged.get(str(k)[:200], 0) + n
        store[key] = merged

  def _timed(self, base: int) -> None:
    """_timing, its span kept (Judge.timing_span): what another candidate's kernels outside every
    hold must overlap to disturb it, not the waits for the fence and the hold before it."""
    v = self.verdict
    v.stage = "timing"
    t0, started = time.perf_counter(), time.time()
    try:
      self._timing(base)
    finally:
      self.timing_span = (started, time.time())
    v.stage_seconds["timing"] = round(time.perf_counter() - t0, 3)

  def _timed_in_hold(self, base: int) -> None:
    """_timed inside the hold of a whole evaluation (Judge.run), made again there, up to
    SandboxConfig.retime_disturbed times, while it is disturbed (GpuSteps._timing_disturbed).
    Setup windows still open are not waited for with the GPU held: the caller looks at the last
    timing again after the hold."""
    for attempt in range(self.cfg.retime_disturbed + 1):
      self._timed(base)
      if attempt == self.cfg.retime_disturbed or not self._timing_disturbed(
          *self.timing_span, retimed=True,
          after_forward=self.verdict.evidence.get("timing_after_forward_ms"), wait=False):
        return

  def _timing(self, base: int) -> None:
    cfg, v = self.cfg, self.verdict
    seeds = self._timing_seeds(base)
    if self.reference_timed is not None:  # by _reference_first
      ref = self.reference_timed
    elif self._knows("reference_ms"):
      v.reference_ms = self.known["reference_ms"]
      v.compile_ms = self.known.get("compile_ms")
      ref = {"trials": self.known.get("reference_trials")}
      v.evidence.setdefault("reference_reused", []).append("timing")
    else:
      ref = self._time_reference(seeds)
    v.reference_facts.update(reference_ms=v.reference_ms, compile_ms=v.compile_ms,
                             reference_trials=ref["trials"])
    from kernelzero_jax.sandbox import timing  # pylint: disable=import-outside-toplevel
    rng = random.Random(os.urandom(8))
    audit_positions = sorted(rng.sample(range(cfg.min_trials), min(cfg.num_audits, cfg.min_trials)))
    band = timing.band_ms(v.reference_ms, cfg.speedup_band, cfg.band_slow_start)
    with self._step("candidate_timing"), self._fence("candidate_timing", timing=True,
                                                     holding_gpu=True):
      reply = self._expect(self.worker.request(
          {"cmd": "time", "seeds": seeds, "audit_positions": audit_positions,
           "warmup": cfg.warmup, "target_s": cfg.timing_target_s,
           "min_trials": cfg.min_trials + len(audit_positions),
           "precision": cfg.timing_precision, "outside_ms": band,
           "outside_min_trials": cfg.band_min_trials,
           "far_ms": band and cfg.band_far_factor and band[1] * cfg.band_far_factor,
           "far_min_trials": cfg.band_far_trials},
          cfg.timing_timeout_s, "timing"), "timing")
    audits = reply["audits"]
    v.candidate_ms = reply["median_ms"]
    v.evidence["timing_trials"] = {"reference": ref["trials"], "candidate": reply["trials"]}
    # Each trial's time and why the trials stopped (timing.time_forward), where measured here:
    # what lets a stopping rule be weighed again offline. The worker's, coerced and capped.
    # (And the warm-up calls' times, which no trial holds: what a rule on them is weighed by.)
    for key, most in (("times_ms", cfg.max_trials), ("warmup_ms", cfg.warmup)):
      v.evidence[f"timing_{key}"] = {
          side: [round(float(x), 4) for x in got[key][:most]
                 if isinstance(x, (int, float)) and math.isfinite(x)]
          for side, got in (("reference", ref), ("candidate", reply))
          if isinstance(got.get(key), list)}
    v.evidence["timing_stopped"] = {
        side: got["stopped"] for side, got in (("reference", ref), ("candidate", reply))
        if got.get("stopped") in ("precision", "outside", "far", "planned")}
    # What each measured interval held past the end of forward's work on its stream (timing.py):
    # the host's wake-up, and work left on other streams. The reference's, where measured here.
    after = {"reference": ref.get("after_forward_ms"),
             "candidate": reply.get("after_forward_ms")}
    v.evidence["timing_after_forward_ms"] = {
        k: float(x) for k, x in after.items() if isinstance(x, (int, float)) and math.isfinite(x)}
    # What a trial cost beyond its measurement, and its input set's part of that (timing.py);
    # the candidate's as its worker says, for reading only.
    loop = {side: {k: float(x) for k in ("inputs_ms", "beyond_ms")
                   if isinstance(x := got.get(k), (int, float)) and math.isfinite(x)}
            for side, got in (("reference", ref), ("candidate", reply))}
    v.evidence["timing_loop_ms"] = {side: d for side, d in loop.items() if d}
    if len(audits) != len(audit_positions):
      raise StageFailure(V.REJECTED, "timing: the audited calls did not all happen")
    with self._step("audits"):
      for seed, outs in audits:
        refs, _, _ = self._reference(seed)
        self._compare(outs, refs, "timing (audited call)")
        del refs

  def _timed_apart(self, base: int, hold, release: bool) -> None:
    """_timed in a hold of the whole GPU, taken after the fence (the GPU shared before and
    after). Made again, up to SandboxConfig.retime_disturbed times, while it is disturbed
    (GpuSteps._timing_disturbed: its intervals held too much past the forward's end, as beside
    another candidate's kernels outside every hold). Then _after_the_timing."""
    for attempt in itertools.count():
      # The fence before the GPU: a timing that held every slot while start-ups under way
      # finished would leave the GPU idle (on an H200, a batch of 70 ran 16% slower so).
      with self._fence("timing", timing=True), hold(exclusive=True):
        self._holding(lambda: self._timed(base),
                      lambda: release and self._release_gpu_memory())
      retime = attempt < self.cfg.retime_disturbed
      disturbed = self._timing_disturbed(
          *self.timing_span, retimed=retime,
          after_forward=self.verdict.evidence.get("timing_after_forward_ms"))
      if not disturbed or not retime:
        break
    self._after_the_timing(disturbed)

  def _after_the_timing(self, disturbed: bool) -> None:
    """What the last timing's outcome leaves: a clean one shares the reference's facts; one
    disturbed too reports no speedup (Judge._evaluate; evidence["timing_unreliable"]). Its times
    stay, for reading, but a ratio of times that another candidate's kernels stretched 2-3x
    measures nothing (on an H100, three busy_at_import copies among 19 candidates disturbed all
    three timings of one, 2.8x and 4.2x)."""
    if disturbed:
      self.verdict.evidence["timing_unreliable"] = (
          "its last timing was disturbed too (evidence['timing_disturbed']): no speedup")
    else:
      self._share_reference_facts()

  def _share_reference_facts(self) -> None:
    """Shares what this judge knows of the reference (judge_reference.share_facts), once its
    candidate's timing has passed its audits and nothing disturbed it: a candidate caught there
    (e.g. one that kept the GPU busy while the reference was timed), or another's kernels
    outside every hold, leave no time for others."""
    if self.facts_path:
      judge_reference.share_facts(self.facts_path, self.verdict.reference_facts)

  def _post_check(self, base: int) -> None:
    """A last check on unseen inputs, then this evaluation's GPU memory is freed for the next."""
    self.verdict.stage = "post_check"
    self._check_seed(base + 999_983, profile=True, stage="post_check")
    self._record_input_set_ms()  # (every set made is done: the check's comparison waited)
    with self._step("cleanup"):
      self._drop_or_kill_worker()
      del self.ref_model
      if self.device.type == "cuda":
        self.torch.cuda.empty_cache()
