"""Sandbox settings and the named tolerance presets."""

from __future__ import annotations

import dataclasses
from typing import Any

from kernelzero_jax.sandbox.gpu_budget import CHECK_MEMORY_SHARE, WEIGHTS_KEPT_SHARE
from kernelzero_jax.sandbox.job_order import JOB_ORDERS

# name -> {dtype: (atol, rtol)}; "*" applies to every dtype not listed.
TOLERANCE_PRESETS: dict[str, dict[str, tuple[float, float]]] = {
    # The paper's setting: atol = rtol = 1e-2 for every dtype.
    "kernelzero": {"*": (1e-2, 1e-2)},
    # KernelBench's current setting: 1e-4 for fp32, 1e-2 for half precision.
    "kernelbench": {"float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (1e-2, 1e-2),
                    "*": (1e-4, 1e-4)},
}

BACKENDS = ("cuda", "triton")
DEVICES = ("cuda", "cpu")


@dataclasses.dataclass
class SandboxConfig:
  """How one candidate is judged. Every field is recorded in the verdict where it matters."""

  device: str = "cuda"
  tolerance: str = "kernelzero"
  # Explicit tolerances override the preset when both are set (the verdict then names "custom").
  atol: float | None = None
  rtol: float | None = None
  num_correct_trials: int = 5
  seed: int = 0  # base seed: input sets use seed+1..; parameters use `init_seed`.
  init_seed: int = 42
  # Stage limits (seconds) and the worker's memory limit (host RSS; GPU memory as a fraction).
  build_timeout_s: float = 600.0
  correctness_timeout_s: float = 300.0
  timing_timeout_s: float = 300.0
  memory_limit_gb: float = 16.0
  gpu_memory_fraction: float = 0.45
  # Timing (GPU only). The number of trials adapts to the kernel's speed within [min, max].
  # Timings start slow (the first 1-9 trials over 3% slow in 488 of 1208 recorded on an H100
  # and an H200): with 5 trials at least, or one warm-up call, references measured 10-19% slow
  # where these defaults did not (BENCHMARKS.md, "Timings stopped once their median is known").
  timing: bool = True
  warmup: int = 3
  min_trials: int = 10
  max_trials: int = 100
  timing_target_s: float = 1.0
  # Stop a timing before its target once its median is known to within +-this fraction
  # (timing.precise_enough: a 90% distribution-free interval; at least min_trials trials). None:
  # every timing runs to its target. On an H100, a batch of 259 ran 1.07x faster with 42% fewer
  # candidate trials, the same verdicts, and times within the copies' spread.
  timing_precision: float | None = 0.01
  # The speedups (the reference's time over the candidate's) worth timing_precision, for a
  # reward that tells apart no others (clipped speed terms: 1x to 3x; the Coder's RL sets it
  # from its reward, coder.environment.sandbox_for_reward). A candidate's timing whose speedup
  # is known (timing.known_outside) to lie under the first by `band_slow_start` more or over
  # the second stops after `band_min_trials` timed trials and the last audit. (Timings start
  # slow: in 1208 recorded on an H100 and an H200, the low end of the median's interval over the
  # first 5-9 trials lay up to 19.6% over the whole series' median; a faster kernel must not be
  # taken for one under 1x.) None: every timing to timing_precision. Replayed on the recorded
  # trials of a batch of 259 on an H100: 37% fewer candidate trials, 35% less of their time, no
  # speedup moved across 1x or 3x (benchmarks/stopping_rules.py; not yet measured in a GPU run).
  speedup_band: tuple[float, float] | None = None
  band_slow_start: float = 0.25
  band_min_trials: int = 5
  # ...and one whose first `band_far_trials` timed trials each took over `band_far_factor` times
  # the band's slow end stops after them, its audits still to come made at once (timing.py): a
  # speedup that far under the band earns what any under it does. Replayed on the 11381
  # candidate timings stored with their trials (benchmarks/results: H100s, H200s), 4 and 3 would
  # have stopped 5688, whose whole medians all lay 2.1x or more over the slow end; the slowest
  # start of any was 2.27x its median. On the H200 batch of 259 with the band it would have
  # timed 11.9 s less of the 89.7 s its timings held the GPU alone
  # (benchmarks/stopping_rules.py --far_factors; BENCHMARKS.md, "The far rule replayed"). Not
  # yet measured in a GPU run. None: off (sandbox_throughput's path token `farF` sets it).
  band_far_factor: float | None = None
  band_far_trials: int = 3
  num_audits: int = 2  # untimed timing-phase calls whose outputs are checked (anti-replay)
  # The reference (ours) is timed on one input set, made again only where its forward changed it
  # in place, instead of a fresh set per trial as the candidate is: for the 6-8 GiB problems,
  # making a set costs about as much as the forward (timing.py).
  reference_reuses_inputs: bool = True
  compare_torch_compile: bool = False
  check_degenerate: bool = True
  profile_kernels: bool = True  # GPU: which kernels really ran, on which streams
  reference_tf32: bool = False
  # GPU judges whose untimed checks may run at once on one GPU (timing always has it alone).
  # 1: every judge has the GPU to itself from its first check to its last. More is for small
  # problems: the checks' memory adds up, so a problem whose inputs would not fit that many
  # times holds as many slots as its checks need (gpu_budget.check_width; all of them: checked
  # alone), and a candidate that runs out of GPU memory while sharing is judged again alone
  # (evaluate.shared_gpu_oom).
  gpu_concurrency: int = 1
  # With gpu_concurrency > 1: checks of a problem too large for one slot hold as many as they
  # need (gpu_budget.check_width) instead of the whole GPU, so that they still share it.
  wide_checks: bool = True
  # With gpu_concurrency > 1: a timing that waits for the GPU keeps new checks off it, and waits
  # only for the checks under way (gpu_budget.gpu_slots' turnstile); without it, checks that
  # start meanwhile take the slots it has not reached yet. On an H100 a batch ran at 1.00x with
  # it (259 candidates) and 0.96x (151, with the speedup band), bound there by holds of the whole
  # GPU (BENCHMARKS.md, the two sections named for `tfirst`); the H200, where the slot waits
  # were, is not measured: off (sandbox_throughput's path token `tfirst`).
  timings_first: bool = False
  # The order in which a pool starts its jobs (job_order.JOB_ORDERS; verdicts come back in the
  # caller's order): "given", as they came, or "spread", each reference's jobs evenly over the
  # batch, so that the judges of one reference do not wait side by side for the same weights'
  # place and CPU work (job_order.py).
  job_order: str = "given"
  # With gpu_concurrency > 1: a judge whose problem is small enough for every judge on the GPU
  # to keep a check's memory outside the slots (gpu_budget.memory_kept_fits) keeps its memory from
  # its checks to its timing and on, instead of freeing it (in itself and its worker) before
  # each hold ends.
  keep_memory_between_holds: bool = True
  # A judge keeps its problem's model weights on the GPU between its holds where the weights
  # the judges on it keep now, and its own, fit the weights' share of its memory (a ledger of
  # lock files: gpu_budget.weights_kept); otherwise its whole evaluation runs in one hold of the
  # whole GPU (Judge._weights_apart). False: only where every judge on it could keep as much
  # (gpu_budget.weights_kept_fit), the same bound counted over judges that might: on an H100 with
  # 24 judges, 85 of a batch of 259 (75 level-2 GEMMs of 256 MiB, 10 of problem 59) then ran
  # alone for it.
  weights_ledger: bool = True
  # The share of a GPU's memory that judges' model weights may take between their holds (the
  # ledger's bound, or weights_kept_fit's): gpu_budget.WEIGHTS_KEPT_SHARE, 0.15, beside the
  # checks' CHECK_MEMORY_SHARE (0.8), which leaves 5% for the allocators' slack. At 0.1, on an
  # H200 in a batch of 259 (2026-12-06), level-2 problem 59 (4 GiB of weights, 8 GiB for a judge)
  # found 7.5-11.5 GiB of the 14 kept by others, so each of its 10 candidates ran its whole
  # evaluation alone (2.33 s held at the median, a fifth of the batch's alone holds); on an H100
  # the level-2 GEMMs' judges (512 MiB each) were refused too, 46-50 of 259 alone, and 0.15 left
  # 12-13 (problem 59's still), 1.04x and 1.05x as fast (BENCHMARKS.md; benchmarks' path token
  # `wkX` sets another share).
  weights_kept_share: float = WEIGHTS_KEPT_SHARE
  # GPU judges load the kernels and the cuBLAS handle that their first reference check needs
  # when they start (judge_gpu.warm_up_device), instead of under the GPU hold.
  judge_warm_up: bool = True
  # CPU niceness of the processes that only build (the CUDA prebuilder, the Triton precompiler):
  # a timing's interval ends after a synchronize, so it holds the host's wake-up, and on an H200
  # machine with its cores busy that tripled a 3 ms kernel's measured time in one of 5 timings
  # (benchmarks/timing_noise.py). Builds are throughput work; timing is not. 0: as started.
  # A judge alone on the machine does not nice them: nobody else times, and its own build is
  # on its critical path (0.96 s against 0.67 s for a lone Triton precompile on an H200).
  build_nice: int = 10
  # CUDA candidates: build with a precompiled torch/extension.h for the generated main.cpp, and
  # a lighter header and only the operator headers it names in the .cu, falling back to the
  # plain build if that fails (fast_build.py).
  fast_build: bool = True
  # CUDA candidates, with fast_build: build a .cu that uses only what kz_torch_lite.h declares
  # against it instead of torch's headers, falling back to the fast build (lite_build.py).
  # On an H200: 8.5 s a build instead of 24 s, the same verdicts (BENCHMARKS.md).
  lite_cuda_header: bool = True
  # ...and main.cpp against kz_torch_lite_bind.h (pybind11 and the lite header) instead of the
  # precompiled torch/extension.h. On an H200: 3.4 s a build instead of 6.9 s, the same
  # verdicts (BENCHMARKS.md).
  lite_main_cpp: bool = True
  # ...with the binding header precompiled once per machine (beside the PCH, fast_build.py), so
  # that a lite main.cpp does not parse pybind11 for every candidate.
  lite_bind_pch: bool = True
  # ...or, where lite_capi.py can bind the candidate's functions exactly as pybind11 would,
  # main.cpp without pybind11: each function bound through CPython's API. On an H200 a lite
  # build's compilers take 3.3 CPU seconds instead of 5.4, and a batch of 259 CUDA candidates
  # 6.8-6.9 busy core-seconds a candidate instead of 8.4-9.7, the same verdicts
  # (BENCHMARKS.md; sandbox_throughput's path token `pybind` turns it off).
  lite_capi_main: bool = True
  # CUDA candidates on a GPU, with fast_build: build their extensions in a second worker with
  # no GPU while the candidate's worker sets itself up, which then finds them built
  # (cuda_prebuild.py).
  cuda_prebuild: bool = True
  # Triton candidates on a GPU: compile their kernels in a second worker on the meta device
  # while the candidate's worker starts, so that the first check, which holds the GPU, does not
  # (triton_precompile.py).
  triton_precompile: bool = True
  # Triton candidates on a GPU: Triton's driver utilities (a C module, the same for every
  # candidate) compiled once per machine by a trusted process and copied into each candidate's
  # own Triton cache, instead of compiled with gcc for every candidate (triton_seed.py).
  triton_seed: bool = True
  # Candidates on a GPU (Triton's, and CUDA's with a prebuilder): a judge that must measure the
  # reference itself (its timing, its degenerate checks) does so before its worker imports the
  # candidate, if the GPU is free then, instead of after the candidate's checks; the worker waits
  # for it, set up, while the candidate's kernels compile in the precompiler or prebuilder (no
  # GPU there). A lone candidate no longer waits for the reference after it is built. In a busy
  # batch the GPU is rarely free then, and the order stays as it was.
  reference_first: bool = True
  # Correctness checks: the judge computes the reference's outputs for an input set while the
  # candidate's worker runs on its own copy of it, instead of after (nothing is timed then).
  concurrent_reference: bool = True
  # Comparisons of float32 outputs on the GPU in one kernel, compiled by NVRTC in the judge's
  # memory while the candidate builds, instead of about 20 torch ops (fused_compare.py); the
  # same numbers, bit for bit. Anything the kernel does not take, or a failed compile, goes the
  # torch way.
  fused_compare: bool = True
  # GPU: models with 16 MiB or more on the CPU move to the GPU from their own pages page-locked
  # in place (host_registration.py), in the same step, hold or fence as the plain move. On an H200
  # machine 4 GiB moved in 0.34 s so against 0.79 s from pageable memory, alone
  # (benchmarks/host_upload.py); batches of 36 level-2 and of 70 mixed CUDA candidates ran at
  # 1.06x and 1.05x the rate, with the same verdicts (BENCHMARKS.md, "Five sandbox changes").
  registered_uploads: bool = True
  # ...with the pages registered before the GPU hold in which the model moves, under the start-up
  # fence (host_registration.register_ahead), the hold keeping only the copy and the
  # unregistering: of level-2 problem 59's whole-GPU hold (2.9 s a candidate in a batch on an
  # H200), registering its two 4 GiB models took 0.6-1.8 s, the copies 0.16 s. In a batch of 259
  # on an H200 (BENCHMARKS.md, "A reward's speedup band on an H200"; gpu_steps on its verdicts)
  # problem 59's holds fell from 2.61 to 1.79 s at the median, but the 85 judges of 16 MiB or
  # more of weights spent 4.7 s at the median in that step (the fence's wait, then registering;
  # not under a hold), and the batch ran at 75.9 a minute against 75.0 beside it (`noledger`),
  # within the default's spread between runs: off (sandbox_throughput's path token `regahead`
  # turns it on).
  register_uploads_ahead: bool = False
  # Judges of one pool share what they learnt about a reference alone (its degenerate flags; on
  # the GPU, its timing) with the other judges of the same reference and config, which then skip
  # measuring it again. The reference is ours, so reusing its facts cannot help a candidate.
  reuse_reference: bool = True
  # GPU judges and their workers create their CUDA contexts, upload models and warm up with a
  # fence (gpu_fence.py) taken shared, which timings take alone: no timing carries their driver
  # work (on an H200 it stretched a 0.29 ms forward's measured time 18x).
  startup_fence: bool = True
  # At most this many of those start-ups that create a CUDA context (a judge's, a worker's)
  # hold the fence at once (0: no limit). The driver does one context at a time anyway; a timing
  # waits for every start-up inside the fence. A judge's later steps (its reference's upload,
  # its warm-up) take the fence without a slot: they are short, in a context that exists.
  startups_at_once: int = 4
  # Whether a reference with no parameters or buffers (nn.Module's own `to`) still takes the
  # fence for its upload at start-up, as before 2026-12-06. Moving it is no driver or GPU work,
  # and in a batch of 259 on an H200 the level-1 judges (most of them such references) waited
  # 5.5 s at the median for the fence while their candidates built in 2.5 s.
  fence_empty_uploads: bool = False
  # A reference with tensors to move goes to the GPU in its judge's first hold (the reference
  # measured first, or its candidate's checks) instead of under the fence while its candidate
  # builds: the fence waits for every timing, and in that batch the level-2 judges waited 7.1 s
  # for it at the median while their candidates built in 3.2 s. The hold, which no timing
  # overlaps, carries the copy instead. Off until a batch measures it on a GPU
  # (sandbox_throughput's path token `refinhold`).
  reference_upload_in_hold: bool = False
  # Jobs one judge process serves in turn before it ends, with the warm server (zygote.py,
  # judge_host.py): a GPU judge then creates its CUDA context once for them all instead of once
  # per candidate. Every candidate still gets a worker process of its own. None: 32 on a GPU,
  # 1 on the CPU (where a judge has no context to keep and a fork costs milliseconds).
  jobs_per_judge_process: int | None = None
  # Candidates one worker process serves in turn, within such a judge process (1: a new worker,
  # and on a GPU a new CUDA context, for every candidate). A worker is kept only after a correct
  # candidate, and only where nothing that candidate did is left in it (worker_state.py: Python
  # and torch state, the dispatcher's operators, OS threads, GPU memory); it is stopped while
  # its judge writes a verdict. Judges then draw their own input seeds (instead of ones derived
  # from `seed` alone), and a candidate that fails in a kept worker is judged again in a new one.
  # (The seeds' base goes to evidence["input_seed_base"].) None: 8 on a GPU, 1 on the CPU (where
  # a judge process serves one job). On an H200 (BENCHMARKS.md) a batch of 259 CUDA candidates
  # ran at 57.6 a minute with 8 against 46.9 with 1: a new worker's CUDA context waits for the
  # start-up fence, which timings close, 11-14 s at the median in such a batch.
  candidates_per_worker: int | None = None
  # With kept workers: a CUDA candidate whose lite build failed in its prebuilder (which then
  # builds the fallback way: fast_build.py) gets a new worker instead of the kept one, so that
  # its failure, the likely end of such a build, needs no second judging (a kept worker's
  # failures are judged again in a new one, building everything again). In a batch where 3 in 4
  # candidates failed on an H100, one new worker per candidate ran 1.19-1.32x the kept
  # workers' throughput, with 10-13 compile errors built twice (BENCHMARKS.md).
  fresh_worker_for_fallback_builds: bool = True
  # With kept workers: a candidate whose reference's pass rate, as the pool estimates it from its
  # recent verdicts (pass_rates.py), is under this goes to a new worker instead of a kept one.
  # A kept worker spares a candidate that passes its start, but a failure in it is judged again
  # in a new worker: kept workers for every candidate lost 4-8% of the throughput of a new
  # worker per candidate where 3 in 5 candidates failed (an H100), and gave 1.23x where all
  # passed (an H200; BENCHMARKS.md). 0: every candidate may take a kept worker, as before
  # 2026-12-06.
  keep_worker_min_pass_rate: float = 0.5
  # CUDA: where every error of a candidate's failed lite build is an undefined identifier that
  # torch's light .cu header does not declare either (light_names.py: the names are written
  # beside the PCH), the build as asked comes next, without the fast build's parse of that
  # header. Verdicts are the same either way (the build as asked decides them). Off until a
  # batch measures it on a GPU (sandbox_throughput's path token `skiplight`).
  skip_light_after_lite_errors: bool = False
  # GPU: milliseconds of GPU kernels that a candidate's import and its constructor may each run.
  # Both run outside the judge's GPU holds, beside other judges' timings (GPU contexts
  # time-slice, so those timings would lengthen, a shared reference time with them), and are
  # profiled (evidence["setup_gpu"]); more is rejected. None: not profiled.
  setup_kernel_ms_limit: float | None = 50.0
  # GPU: a timing is disturbed when its intervals held more than `retime_after_forward_ms` (at
  # the median over its trials) past the end of its forward's work on its stream: another GPU
  # context's time slice, such as another candidate's kernels outside every hold (at import or
  # in its constructor: setup_windows.py). On an H200, the 10 timings made beside
  # busy_at_import's kernels held 2.386 ms there and measured 2.2-2.9x, 845 of the 848 others
  # 0.02-0.93 ms; on an H100, all 22 such timings measured 2.1-5.7x, and none of the 83 that
  # only overlapped such code's window was off (BENCHMARKS.md). None: not looked at. A disturbed
  # timing is made again up to `retime_disturbed` times (0: only told, in
  # evidence["timing_disturbed"]); one still disturbed then reports no speedup
  # (evidence["timing_unreliable"]). The windows that overlapped a timing are told beside it,
  # those still open waited for up to `setup_window_wait_s` (0: told as "unresolved").
  retime_disturbed: int = 2
  retime_after_forward_ms: float | None = 1.0
  setup_window_wait_s: float = 0.0
  # Where the precompiled header and Triton's seed live (default ~/.cache/kernelzero_jax/pch).
  pch_dir: str | None = None

  def __post_init__(self):
    if self.device not in DEVICES:
      raise ValueError(f"device must be one of {DEVICES}, got {self.device!r}")
    if self.tolerance not in TOLERANCE_PRESETS and (self.atol is None or self.rtol is None):
      raise ValueError(f"unknown tolerance preset {self.tolerance!r}; known: "
                       f"{sorted(TOLERANCE_PRESETS)} (or give both atol and rtol)")
    if self.gpu_concurrency < 1:
      raise ValueError("gpu_concurrency must be >= 1")
    if not 0 <= self.build_nice <= 19:
      raise ValueError(f"build_nice must be in [0, 19] (a niceness added), got {self.build_nice}")
    if self.setup_kernel_ms_limit is not None and self.setup_kernel_ms_limit < 0:
      raise ValueError("setup_kernel_ms_limit must be >= 0 (or None: not profiled)")
    if self.retime_disturbed < 0 or self.setup_window_wait_s < 0:
      raise ValueError("retime_disturbed and setup_window_wait_s must be >= 0")
    if self.retime_after_forward_ms is not None and self.retime_after_forward_ms <= 0:
      raise ValueError("retime_after_forward_ms must be > 0 (or None: not looked at)")
    if self.startups_at_once < 0:
      raise ValueError("startups_at_once must be >= 0 (0: no limit)")
    if self.timing_precision is not None and not 0 < self.timing_precision < 1:
      raise ValueError("timing_precision must be in (0, 1) (a fraction of the median), or None")
    if not 1 <= self.min_trials <= self.max_trials or self.warmup < 0:
      raise ValueError("need 1 <= min_trials <= max_trials and warmup >= 0")
    if self.speedup_band is not None:
      band = tuple(self.speedup_band)
      if (len(band) != 2 or not all(isinstance(x, (int, float)) for x in band)
          or not 0 < band[0] < band[1]):
        raise ValueError("speedup_band must be (low, high) with 0 < low < high (high may be "
                         f"inf), or None; got {self.speedup_band!r}")
    if self.band_slow_start < 0 or self.band_min_trials < 5:
      raise ValueError("need band_slow_start >= 0 and band_min_trials >= 5 (fewer than 5 trials "
                       "never bound their median at 90%: timing.median_interval)")
    if (self.band_far_factor is not None and not self.band_far_factor >= 1) or (
        self.band_far_trials < 1):
      raise ValueError("need band_far_factor >= 1 (or None: off) and band_far_trials >= 1; got "
                       f"{self.band_far_factor!r}, {self.band_far_trials!r}")
    if self.jobs_per_judge_process is not None and self.jobs_per_judge_process < 1:
      raise ValueError("jobs_per_judge_process must be >= 1 (or None: the device's default)")
    if self.candidates_per_worker is not None and self.candidates_per_worker < 1:
      raise ValueError("candidates_per_worker must be >= 1 (or None: the device's default)")
    if not 0 <= self.keep_worker_min_pass_rate <= 1:
      raise ValueError("keep_worker_min_pass_rate must be in [0, 1] (0: every candidate may "
                       f"take a kept worker), got {self.keep_worker_min_pass_rate}")
    if not 0 < self.weights_kept_share <= 1 - CHECK_MEMORY_SHARE + 1e-9:  # (1 - 0.8 is 0.1999...)
      raise ValueError("weights_kept_share must be in (0, 1 - gpu_budget.CHECK_MEMORY_SHARE] = "
                       f"(0, {1 - CHECK_MEMORY_SHARE:.2f}] (checks may fill the rest), got "
                       f"{self.weights_kept_share}")
    if self.job_order not in JOB_ORDERS:
      raise ValueError(f"job_order must be one of {sorted(JOB_ORDERS)}, got {self.job_order!r}")
    if self.num_correct_trials < 1:
      raise ValueError("num_correct_trials must be >= 1")
    for name in ("build_timeout_s", "correctness_timeout_s", "timing_timeout_s", "memory_limit_gb"):
      if getattr(self, name) <= 0:
        raise ValueError(f"{name} must be positive")

  def tolerance_for(self, dtype_name: str) -> tuple[float, float]:
    """(atol, rtol) for outputs of this dtype (e.g. "float32")."""
    if self.atol is not None and self.rtol is not None:
      return float(self.atol), float(self.rtol)
    preset = TOLERANCE_PRESETS[self.tolerance]
    return preset.get(dtype_name, preset["*"])

  def jobs_per_judge(self) -> int:
    """jobs_per_judge_process, with None as its device's default."""
    if self.jobs_per_judge_process is not None:
      return self.jobs_per_judge_process
    return 32 if self.device == "cuda" else 1

  def worker_candidates(self) -> int:
    """candidates_per_worker, with None as its device's default."""
    if self.candidates_per_worker is not None:
      return self.candidates_per_worker
    return 8 if self.device == "cuda" else 1

  def tolerance_name(self) -> str:
    return "custom" if (self.atol is not None and self.rtol is not None) else self.tolerance

  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, d: dict[str, Any]) -> "SandboxConfig":
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - names)
    if unknown:
      raise ValueError(f"unknown sandbox config fields: {unknown}")
    return cls(**d)
