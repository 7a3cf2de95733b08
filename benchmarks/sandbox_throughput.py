r"""Sandbox throughput: the fast path against the plain one, same batch, one run.

    python -m benchmarks.sandbox_throughput --kernelbench_dir=.kb --backends=cuda,triton \
        --paths=zygote:fast,subprocess:plain --out=/tmp/throughput.json

A path is
LAUNCHER:BUILD[:REFERENCE][:gpuN][:nopre][:serial][:torchcmp][:alone][:nonice][:refafter]
[:release][:nowarm][:tS][:pN]: judges forked from the warm server (`zygote`) or started as fresh
interpreters (`subprocess`); CUDA extensions built with the precompiled header and the light .cu
header (`fast`, sandbox/fast_build.py), with the .cu against kz_torch_lite.h first (`lite`,
sandbox/lite_build.py), with main.cpp against kz_torch_lite_bind.h too (`lite_main`), with that
binding header precompiled (`lite_pch`, the default), or as `load_inline` builds them (`plain`);
the reference's checks and timing measured once and shared with the other judges of the same
reference (`reuse`, the default: SandboxConfig.reuse_reference) or measured by every judge
(`measure`); with `gpuN`, N judges checking correctness on the GPU at once (timing always has it
alone; default --gpu_concurrency); and with `nopre`, candidates judged without building ahead
beside their worker: Triton's without the precompiler (sandbox/triton_precompile.py), CUDA's
without the prebuilder (sandbox/cuda_prebuild.py), both on by default; with `serial`, the judge
computing the reference's outputs after the candidate's run instead of during it
(SandboxConfig.concurrent_reference); with `torchcmp`, outputs compared with torch's ops instead
of the fused kernel (SandboxConfig.fused_compare); with `alone`, problems whose checks need more
than one slot's memory checked with the GPU alone instead of on several slots
(SandboxConfig.wide_checks); with `nonice`, the prebuilders and precompilers at the CPU priority
they started with instead of niced (SandboxConfig.build_nice); with `refafter`, a judge (of a
Triton candidate, or a CUDA one with a prebuilder) measuring the reference after the candidate's
checks even when the GPU is free before its worker imports the candidate
(SandboxConfig.reference_first); with `release`, every judge sharing the GPU freeing its checks'
memory before each hold ends, even where every judge could keep as much
(SandboxConfig.keep_memory_between_holds); with `nowarm`, judges loading what their first
reference check needs under the GPU hold instead of when they start
(SandboxConfig.judge_warm_up); with `nosetup`, candidates' imports and constructors run without
the profiler that limits their GPU work (SandboxConfig.setup_kernel_ms_limit); with `nofence`,
judges and workers starting up beside timings instead of apart (SandboxConfig.startup_fence);
with `onejob`, a judge process (and its CUDA context) for every candidate instead of one serving
several in turn (SandboxConfig.jobs_per_judge_process, judge_host.py); with `tS` (e.g.
`t0.1`), a timing target of S seconds instead of --timing_target_s (what a shorter timing buys
in throughput and costs in precision, in one run);
with `pN` (e.g. `p48`), N judges at once instead of --max_parallel; with `fN`, at most N
start-ups inside the fence at once instead of SandboxConfig.startups_at_once (`f0`: no limit);
with `wN`, a worker serving up to N candidates in turn (SandboxConfig.candidates_per_worker,
worker_state.py; `w1`: a new worker per candidate) instead of the device's default (8 on a GPU);
with `refregen`, the reference timed on a fresh input set per trial as the candidate is
(SandboxConfig.reference_reuses_inputs); with `gcscan`, the warm servers' imports left in the
garbage collector's sight (KZ_GC_FREEZE=0: zygote.freeze_imports); with `wsspawn`, a judge
process's worker server a fresh interpreter it starts after its first job instead of a fork of it
made before (KZ_WORKER_SERVER_FORK=0: forked_worker_server.py); with `seqlaunch`, a Triton
precompiler building its kernels' C launchers after their compiles instead of beside them
(KZ_TRITON_EARLY_LAUNCHERS=0: triton_precompile.py); with `wuN` (e.g. `wu1`), N warm-up calls
before each timing's trials instead of SandboxConfig.warmup's (the candidate's checks have run
its forward by then; what fewer cost in precision shows in the copies' spread); with `pageable`,
models moved to the GPU from pageable memory instead of from their own pages page-locked in place
where they have 16 MiB or more (SandboxConfig.registered_uploads=False: host_registration.py);
with `secondfirst`, a Triton judge that times the reference first building its second model
before that timing, however long the first took (KZ_SECOND_REFERENCE_AFTER=0:
judge_reference.SECOND_REFERENCE_AFTER_S); with `pristine`, each check's input set copied before
the reference's forward and the worker's compared with that copy, instead of with the reference's
inputs after its forward (KZ_INPUTS_AGAINST_REFERENCE=0: Judge._inputs_kept); with `allseed`,
input sets and models seeded by torch.manual_seed, which also queues the seed for backends no
sandbox process uses, formatting the stack for each (KZ_SEED_ALL_BACKENDS=1: problem.seed_torch);
with `precX` (e.g. `prec0.02`), timings stopped
once their median is known to +-X instead of SandboxConfig.timing_precision's (`prec0`: every
timing runs to its target, as before 2026-12-05's evening); with `mtN`, at least N timed trials
instead of SandboxConfig.min_trials's; with `regahead`, large models' pages registered before
the GPU hold in which they move, under the start-up fence, instead of in it
(SandboxConfig.register_uploads_ahead: host_registration.register_ahead); with `bandL-H` (e.g.
`band1-3`, `band1-inf`), candidates' timings precise only for speedups between L and H
(SandboxConfig.speedup_band, which the Coder's RL sets from its reward), not for all; with
`noledger`, a judge keeps its weights on the GPU between holds only where every judge on it could
keep as much, not where those kept now and its own fit (SandboxConfig.weights_ledger); with
`pybind`, a lite main.cpp binds the candidate's functions through pybind11 as before 2026-12-06,
not through CPython's API where it can (SandboxConfig.lite_capi_main, lite_capi.py); with
`emptyfence`, a reference with no parameters or buffers uploaded under the start-up fence all
the same, as before 2026-12-06 (SandboxConfig.fence_empty_uploads); with `refinhold`, a
reference with tensors uploaded in its judge's first GPU hold instead of under the start-up
fence while its candidate builds (SandboxConfig.reference_upload_in_hold); with
`keptfallback`, a kept worker building a candidate whose lite build failed in its prebuilder, as
before 2026-12-06, instead of a new worker (SandboxConfig.fresh_worker_for_fallback_builds); with
`keepall`, a kept worker for any candidate, as before 2026-12-06, not only for those whose
reference's pass rate so far is at least SandboxConfig.keep_worker_min_pass_rate; with
`skiplight`, a candidate whose lite build's errors the light header cannot mend built as asked
at once, without the fast build (SandboxConfig.skip_light_after_lite_errors, light_names.py);
with `tfirst`, a timing that waits for the GPU keeps new checks off it
(SandboxConfig.timings_first, gpu_budget.gpu_slots' turnstile); with `stdtext`, every lite .cu
built with the standard text headers, as before 2026-12-06, not only one that names what they
declare (KZ_LITE_STD_TEXT_ALWAYS=1: lite_build.lite_cuda_source); with `wkX` (e.g. `wk0.1`, the
default before 2026-12-07), judges' model weights kept on the GPU between holds up to X of its
memory instead of SandboxConfig.weights_kept_share's (at most 1 - gpu_budget.CHECK_MEMORY_SHARE);
with `again`, the batch judged once through the pool first (its rate printed, its verdicts in
<out>.<path>.first_batch.verdicts.jsonl) and the pool's second batch measured: its judge
processes started and its references measured by the batch before (an RL run's pool keeps the
references for its lifetime, the judges only while a step comes within zygote.JUDGE_IDLE_S of
the last); with `prestart`,
the pool's judge processes started ahead of the batch (SandboxPool.start_judges: each its CUDA
context and warm-up, as an RL run's pool could while its policy samples), their start reported
apart (judges_started) and not counted in the batch's time; with `spread`, the pool starts each
reference's jobs evenly over the batch (SandboxConfig.job_order "spread", job_order.py), not in
the batch's order; with `farF` (e.g. `far3`) and a band, a candidate's timing whose first
SandboxConfig.band_far_trials trials each took over F times the band's slow end stops after them,
its audits still to come made at once (SandboxConfig.band_far_factor).
The trailing flags come in any order. With a fast CUDA path, the precompiled header is built
first (once per machine; its time is printed).
To time reference reuse on RL-like groups, repeat the teacher's candidates; to see whether
sharing the GPU between checks changes a verdict, compare it with the one-at-a-time path in the
same run:

    python -m benchmarks.sandbox_throughput --kernelbench_dir=.kb --backends=triton --copies=8 \
        --extras=false --paths=zygote:fast:reuse,zygote:fast:measure
    python -m benchmarks.sandbox_throughput --kernelbench_dir=.kb --backends=triton --copies=8 \
        --extras=false --paths=zygote:fast:reuse:gpu4,zygote:fast:reuse:gpu1

The batch: the rule-based teacher's candidate for every KernelBench level-1/2 problem it
understands (full size), each `--copies` times (RL groups repeat candidates), plus the honest and
cheating candidates of benchmarks/candidates/ for the chosen backends, and with `--faults`
failing variants of the teacher's candidates (benchmarks/faulty_candidates.py), for a batch that
fails as an RL step's does; the summary counts each kind's statuses (`by_kind`). Each path
judges the whole batch with the same SandboxPool settings (GPU work serialised per GPU, as in
training). Prints
per-candidate stage times (queue, build, waiting for the GPU, correctness, timing, total), the
medians and the throughput of each path, their ratio, and every candidate whose verdict differs
(status, stage or correctness); writes all verdicts as JSON. (The first H200 results of
2026-11-30 compared the launchers alone, before builds had a fast path:
--paths=zygote:plain,subprocess:plain.)
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import random
import re
import statistics
import time
from typing import Any, Callable, NamedTuple
from unittest import mock

from absl import app
from absl import flags

from benchmarks import faulty_candidates
from benchmarks.cpu_load import CpuLoad
from benchmarks.gpu_clocks import GpuClocks, timing_clocks
from benchmarks.gpu_steps import (check_waits, disturbance_classes, disturbed_timings,
                                   hold_timeline, new_workers, timing_gaps,
                                   left_after_release, message_costs,
                                   rounded_median as _median,
                                   startup_medians as _startup_medians,
                                   step_medians as _step_medians, timing_calls_beyond,
                                   timing_trials_summary, timing_wall_ratios, times_against,
                                   timings_beside_startups)
from kernelzero_jax import atomic_file
from kernelzero_jax.tasks import kernelbench as tasks
from kernelzero_jax.sandbox import Job, SandboxConfig, SandboxPool
from kernelzero_jax.sandbox import fast_build
from kernelzero_jax.sandbox.launchers import LAUNCHERS

# Trailing tokens of a path, in any order: each turns one default off.
PATH_FLAGS = ("nopre", "serial", "torchcmp", "alone", "nonice", "refafter", "release",
              "nowarm", "nosetup", "nofence", "onejob", "refregen", "gcscan", "wsspawn",
              "seqlaunch", "pageable", "secondfirst", "pristine", "allseed", "noretime",
              "regahead", "noledger", "pybind", "emptyfence", "refinhold", "keptfallback",
              "keepall", "skiplight", "tfirst", "stdtext", "again", "prestart", "spread")
PATH_FORM = ("LAUNCHER:BUILD[:REFERENCE][:gpuN][:nopre][:serial][:torchcmp][:alone][:nonice]"
             "[:refafter][:release][:nowarm][:nosetup][:nofence][:onejob][:refregen][:gcscan]"
             "[:wsspawn][:seqlaunch][:pageable][:secondfirst][:pristine][:allseed][:noretime]"
             "[:regahead][:noledger][:pybind][:emptyfence][:refinhold][:keptfallback][:keepall]"
             "[:skiplight][:tfirst][:stdtext][:again][:prestart][:spread]"
             "[:tS][:pN][:fN][:wN][:wuN][:precX][:mtN][:bandL-H][:wkX][:farF]")
TIMING_TOKEN = re.compile(r"t(\d+(?:\.\d*)?|\.\d+)")
PARALLEL_TOKEN = re.compile(r"p[1-9]\d*")
STARTUPS_TOKEN = re.compile(r"f\d+")
WORKER_TOKEN = re.compile(r"w[1-9]\d*")
WARMUP_TOKEN = re.compile(r"wu[1-9]\d*")
PRECISION_TOKEN = re.compile(r"prec(0|0?\.\d+)")
WEIGHTS_SHARE_TOKEN = re.compile(r"wk(0?\.\d+)")
MIN_TRIALS_TOKEN = re.compile(r"mt[1-9]\d*")
BAND_TOKEN = re.compile(r"band(\d+(?:\.\d+)?)-(\d+(?:\.\d+)?|inf)")
FAR_TOKEN = re.compile(r"far(\d+(?:\.\d+)?)")


_KB = flags.DEFINE_string("kernelbench_dir", None, "KernelBench problems (level1/, level2/).")
_CANDIDATES = flags.DEFINE_string("candidates_dir", "benchmarks/candidates", "Candidates root.")
_BACKENDS = flags.DEFINE_list("backends", ["triton"], "Candidate backends: triton, cuda.")
_PATHS = flags.DEFINE_list("paths", ["zygote:fast", "subprocess:plain"],
                           f"{PATH_FORM} paths to compare "
                           "(launchers: "
                           "zygote, subprocess; builds: fast, lite, lite_main, lite_pch, "
                           "plain; "
                           "references: reuse (default), measure; gpuN: N judges check on the "
                           "GPU at once, default --gpu_concurrency).")
_COPIES = flags.DEFINE_integer("copies", 1, "Copies of each teacher candidate in the batch.")
_MAX_TEACHER = flags.DEFINE_integer("max_teacher", 0, "At most this many teacher problems "
                                    "per backend (0: all it understands).")
_PROBLEM_REGEX = flags.DEFINE_string(
    "problem_regex", None, "Only teacher problems whose key (e.g. level1/19_ReLU) this regular "
    "expression matches (before --max_teacher counts them).")
_EXTRAS = flags.DEFINE_bool("extras", True, "Add benchmarks/candidates' honest kernels and cheats.")
_CHEAT_COPIES = flags.DEFINE_integer(
    "cheat_copies", 1, "Copies of each cheat with --extras (cheats/busy_at_import.py keeps the "
    "GPU busy at import, where no judge holds it: more copies, more timings it disturbs).")
_FAULTS = flags.DEFINE_list(
    "faults", [], "Also, for each teacher kernel, failing variants of it "
    f"(benchmarks/faulty_candidates.py: {', '.join(faulty_candidates.FAULTS)}), --fault_copies "
    "of each, named faulty/FAULT/PROBLEM/BACKEND/COPY: a batch that fails as an RL step's does.")
_FAULT_COPIES = flags.DEFINE_integer("fault_copies", 1, "Copies of each failing variant.")
_SHUFFLE_SEED = flags.DEFINE_integer(
    "shuffle_seed", None, "Judge the batch in an order shuffled with this seed (the same on every "
    "path), not problem by problem with the extras last: cheats then run among the others.")
_CHEAT_REGEX = flags.DEFINE_string(
    "cheat_regex", None, "With --extras, only the cheats whose file name this regular "
    "expression matches (and every honest kernel).")
_PARALLEL = flags.DEFINE_integer("max_parallel", 16, "Concurrent judges.")
_TIMING = flags.DEFINE_bool("timing", True, "Time candidates (as the speed reward needs).")
_GPU_CONCURRENCY = flags.DEFINE_integer(
    "gpu_concurrency", 1, "Judges that check correctness on the GPU at once (timing always has "
    "it alone): SandboxConfig.gpu_concurrency.")
_TIMING_TARGET = flags.DEFINE_float(
    "timing_target_s", None, "SandboxConfig.timing_target_s (seconds of measured kernel time "
    "per timing; default: the config's). With --copies, the spread of a candidate's time over "
    "its copies shows what a shorter target costs in precision.")
_DEVICE = flags.DEFINE_string("device", "cuda", "cuda, or cpu (Triton interpreter, no timing).")
_OUT = flags.DEFINE_string("out", "sandbox_throughput.json", "Where to write the results.")
_WARM_UP = flags.DEFINE_bool(
    "warm_up", True, "Start each path's warm judge server (and the machine builds) before its "
    "clock starts, as the Coder's environment does while its policy samples "
    "(SandboxPool.warm_up); the start is reported apart (server_start_s). False: the first "
    "judgement starts it, inside the clock.")

STAGES = ("queue", "launch", "build", "gpu_wait", "correctness", "timing", "exit", "total")


def _header(source: str, key: str) -> str | None:
  m = re.search(rf"^#\s*{key}:\s*(\S+)", source, re.MULTILINE)
  return m.group(1) if m else None


def make_batch(kb_dir: str, backends: list[str], copies: int, max_teacher: int
               ) -> tuple[list[Job], list[dict]]:
  from kernelzero_jax.teacher import NotInFamily, teach  # pylint: disable=import-outside-toplevel
  jobs, meta = [], []
  all_tasks, _ = tasks.scan_tasks(kb_dir, (1, 2))
  for backend in backends:
    taken = 0
    for task in all_tasks:
      if max_teacher and taken >= max_teacher:
        break
      if _PROBLEM_REGEX.value and not re.search(_PROBLEM_REGEX.value, task.key):
        continue
      try:
        source = teach(task.source, backend)
      except NotInFamily:
        continue
      taken += 1
      for c in range(copies):
        jobs.append(Job(task.source, source, backend, name=f"teacher/{task.key}/{backend}/{c}"))
        meta.append({"kind": "teacher", "problem": task.key, "backend": backend})
      for fault in _FAULTS.value:
        broken = faulty_candidates.inject(source, backend, fault)
        for c in range(_FAULT_COPIES.value):
          jobs.append(Job(task.source, broken, backend,
                          name=f"faulty/{fault}/{task.key}/{backend}/{c}"))
          meta.append({"kind": f"faulty/{fault}", "problem": task.key, "backend": backend})
    root = _CANDIDATES.value
    for kind in ("honest", "cheats") if _EXTRAS.value else ():
      folder = os.path.join(root, kind)
      for name in sorted(os.listdir(folder)):
        if not name.endswith(".py"):
          continue
        src = open(os.path.join(folder, name)).read()
        m = re.match(r"level(\d)_(\d+)_(cuda|triton)\.py$", name)
        if kind == "honest" and m:
          lvl, pid, cand_backend = int(m.group(1)), int(m.group(2)), m.group(3)
        elif kind == "cheats" and _header(src, "problem") and _header(src, "backend"):
          lvl, pid = map(int, re.match(r"level(\d)/(\d+)_", _header(src, "problem")).groups())
          cand_backend = _header(src, "backend")
        else:
          continue
        if cand_backend != backend or (kind == "cheats" and _CHEAT_REGEX.value
                                       and not re.search(_CHEAT_REGEX.value, name)):
          continue
        task = tasks.load_task(lvl, pid, kb_dir)
        for c in range(_CHEAT_COPIES.value if kind == "cheats" else 1):
          jobs.append(Job(task.source, src, backend,
                          name=f"{kind}/{name}" + (f"/{c}" if c else "")))
          meta.append({"kind": kind, "problem": task.key, "backend": backend})
  return jobs, meta


LITE_LEVELS = {"fast": 0, "plain": 0, "lite": 1, "lite_main": 2, "lite_pch": 3}


class BenchPath(NamedTuple):
  """One way of judging the batch (--paths)."""
  name: str
  launcher: str
  fast: bool  # CUDA: the fast build (else as load_inline builds)
  reuse: bool  # the reference's facts shared by the judges of a reference
  concurrency: int | None  # judges checking on the GPU at once (None: --gpu_concurrency's)
  lite: int  # what is built lite: 0 nothing, 1 the .cu, 2 the .cu and main.cpp, 3 with its
  # binding header precompiled
  # Triton: kernels compiled before the GPU hold (triton_precompile); CUDA: extensions built
  # beside the worker's start-up (cuda_prebuild)
  precompile: bool = True
  concurrent: bool = True  # the reference's outputs computed while the candidate runs
  fused: bool = True  # outputs compared by the fused kernel (sandbox/fused_compare.py)
  wide: bool = True  # problems too large for one slot checked on several (gpu_budget.check_width)
  timing_target_s: float | None = None  # None: --timing_target_s's (or the config's)
  niced: bool = True  # the processes that only build run niced (SandboxConfig.build_nice)
  # a judge measures the reference before its worker imports the candidate, if the GPU is free
  # then (SandboxConfig.reference_first)
  reference_first: bool = True
  # a judge whose problem is small enough keeps its memory between its GPU holds
  # (SandboxConfig.keep_memory_between_holds)
  keep_memory: bool = True
  # judges load what their first reference check needs when they start
  # (SandboxConfig.judge_warm_up)
  warm_up: bool = True
  # the GPU work of candidates' imports and constructors profiled and limited
  # (SandboxConfig.setup_kernel_ms_limit)
  setup_profiled: bool = True
  # judges' and workers' start-ups kept apart from timings (SandboxConfig.startup_fence)
  fenced: bool = True
  # a judge process serves several jobs in turn (SandboxConfig.jobs_per_judge_process)
  judges_serve_several: bool = True
  parallel: int | None = None  # judges at once (None: --max_parallel's)
  # start-ups inside the fence at once (None: SandboxConfig.startups_at_once's)
  startups_at_once: int | None = None
  # candidates one worker serves in turn (None: SandboxConfig.candidates_per_worker's)
  candidates_per_worker: int | None = None
  # the reference timed on one input set (SandboxConfig.reference_reuses_inputs)
  reference_reuses_inputs: bool = True
  # the warm servers' imports out of the garbage collector's sight (zygote.freeze_imports)
  gc_freeze: bool = True
  # a judge process's worker server forked from it before its first job
  # (forked_worker_server.py), not a fresh interpreter started after it
  worker_server_fork: bool = True
  # Triton 3.6's C launchers built beside their kernels' compiles in the precompiler
  # (triton_precompile._launchers_beside_kernels), not after them
  early_launchers: bool = True
  warmup: int | None = None  # warm-up calls per timing (None: SandboxConfig.warmup's)
  # large models moved to the GPU from their pages page-locked in place
  # (SandboxConfig.registered_uploads), not from pageable memory
  registered_uploads: bool = True
  # a slow reference's second model built after the timing measured first
  # (judge_reference.SECOND_REFERENCE_AFTER_S), not before it
  second_reference_after: bool = True
  # a check's inputs compared with the reference's after its forward, made again only where they
  # differ (Judge._inputs_kept), not with a copy made before it
  inputs_against_reference: bool = True
  # input sets and models seeded by torch.manual_seed, every backend's seeding queued
  # (problem.seed_torch), not the CPU's and CUDA's alone
  seed_all_backends: bool = False
  # a timing that another candidate's kernels outside every hold disturbed made again
  # (SandboxConfig.retime_disturbed), not only told
  retime_disturbed: bool = True
  # a timing stopped once its median is known to +-this fraction (0: run to its target; None:
  # SandboxConfig.timing_precision's)
  timing_precision: float | None = None
  min_trials: int | None = None  # timed trials at least (None: SandboxConfig.min_trials's)
  # large models' pages registered before the GPU hold they move in
  # (SandboxConfig.register_uploads_ahead), not in it
  register_ahead: bool = False
  # candidates' timings precise only between these speedups (SandboxConfig.speedup_band)
  speedup_band: tuple[float, float] | None = None
  # weights kept on the GPU where those kept now fit (SandboxConfig.weights_ledger)
  weights_ledger: bool = True
  # a lite main.cpp bound through CPython's API where it can be (SandboxConfig.lite_capi_main),
  # not through pybind11
  capi_main: bool = True
  # a reference with no tensors uploaded under the start-up fence all the same
  # (SandboxConfig.fence_empty_uploads)
  fence_empty_uploads: bool = False
  # a reference with tensors uploaded in its judge's first GPU hold, not under the start-up
  # fence (SandboxConfig.reference_upload_in_hold)
  reference_upload_in_hold: bool = False
  # a candidate whose lite build failed in its prebuilder built by a new worker, not a kept one
  # (SandboxConfig.fresh_worker_for_fallback_builds)
  fresh_worker_for_fallback_builds: bool = True
  # a kept worker only for candidates whose reference passes often enough so far
  # (SandboxConfig.keep_worker_min_pass_rate), not for any
  choose_workers: bool = True
  # a failed lite build whose errors the light header cannot mend built as asked at once
  # (SandboxConfig.skip_light_after_lite_errors)
  skip_light: bool = False
  # a timing that waits for the GPU keeps new checks off it (SandboxConfig.timings_first)
  timings_first: bool = False
  # every lite .cu with the standard text headers (KZ_LITE_STD_TEXT_ALWAYS, lite_build.py)
  std_text_always: bool = False
  # the share of the GPU's memory that judges' weights may take between holds (None:
  # SandboxConfig.weights_kept_share's)
  weights_kept_share: float | None = None
  # the batch judged once through the pool before the batch that is measured (_first_batch)
  second_batch: bool = False
  # the pool's judge processes started before the batch (SandboxPool.start_judges)
  prestart: bool = False
  # each reference's jobs started evenly over the batch (SandboxConfig.job_order "spread")
  spread: bool = False
  # a timing whose first trials are this far over the band's slow end stopped after them
  # (SandboxConfig.band_far_factor; None: its default)
  band_far_factor: float | None = None


def _weights_share_allowed(share: float) -> bool:
  """Whether SandboxConfig takes this weights_kept_share (its own check), so that a path that
  asks for more fails when the paths are read, not when its turn comes after another's run."""
  try:
    SandboxConfig(weights_kept_share=share)
  except ValueError:
    return False
  return True


def parse_path(path: str) -> BenchPath:
  """PATH_FORM -> BenchPath (`nopre`: no Triton precompiler, no CUDA prebuilder; `serial`: no
  reference computed during a candidate's run; `torchcmp`: outputs compared with torch's ops
  instead of the fused kernel; `alone`: problems too large for one slot checked alone; `nonice`:
  builders not niced; `refafter`: the reference measured after the candidate's checks;
  `release`: memory freed before every hold ends; `nowarm`: no warm-up of the judge when it
  starts; `nosetup`: candidates' imports and constructors not profiled; `nofence`: start-ups
  not kept apart from timings; `onejob`: a judge process per candidate; `refregen`: the
  reference timed on a fresh input set per trial; `gcscan`: the warm servers' imports left to the
  garbage collector; `wsspawn`: a judge process's worker server a fresh interpreter started after
  its first job; `seqlaunch`: Triton launchers built after their kernels; `fN`: at most N
  start-ups inside the fence at once (0: no limit); `tS`: a timing target of S seconds; `pN`: N
  judges at once; `wN`: a worker serving up to N candidates; `wuN`: N warm-up calls per timing;
  `pageable`: models moved to the GPU from pageable memory, not from their pages page-locked in
  place; `secondfirst`: a reference's second model built before the timing measured first;
  `pristine`: a check's inputs compared with a copy made before the reference's forward;
  `allseed`: seeding by torch.manual_seed; `noretime`: timings disturbed by another candidate's
  kernels outside every hold only told, not made again; `precX`: timings stopped once their
  median is known to +-X (`prec0`: every timing runs to its target); `mtN`: at least N timed
  trials; `regahead`: large models' pages registered before the hold they move in; `bandL-H`:
  candidates' timings precise only for speedups between L and H; `noledger`: weights kept on the
  GPU between holds only where every judge could keep as much; `pybind`: a lite main.cpp bound
  through pybind11, not through CPython's API where it can be; `emptyfence`: a reference with
  no tensors to move uploaded under the start-up fence all the same; `refinhold`: a reference
  with tensors uploaded in its judge's first hold, not under the start-up fence;
  `keptfallback`: a kept worker building a candidate whose lite build failed, not a new one;
  `keepall`: a kept worker for any candidate, not only where its reference passes often;
  `skiplight`: no fast build after a lite build that the light header cannot mend; `tfirst`: a
  timing waiting for the GPU keeps new checks off it; `stdtext`: every lite .cu with the
  standard text headers; `wkX`: judges' weights kept on the GPU between holds up to X of its
  memory; `again`: the batch measured is the pool's second, after the same batch once;
  `prestart`: the pool's judge processes started before the batch; `spread`: each reference's
  jobs started evenly over the batch; `farF`: with a band, a timing whose first trials each took
  over F times the band's slow end stopped after them)."""
  launcher, _, rest = path.partition(":")
  build, *extra = rest.split(":")
  flags_given, target, parallel, startups, per_worker = set(), None, None, None, None
  warmup, precision, min_trials, band, weights_share = None, None, None, None, None
  far = None
  while extra:
    token = extra[-1]
    if token in PATH_FLAGS and token not in flags_given:
      flags_given.add(extra.pop())
    elif TIMING_TOKEN.fullmatch(token) and target is None and float(token[1:]) > 0:
      target = float(extra.pop()[1:])
    elif PARALLEL_TOKEN.fullmatch(token) and parallel is None:
      parallel = int(extra.pop()[1:])
    elif STARTUPS_TOKEN.fullmatch(token) and startups is None:
      startups = int(extra.pop()[1:])
    elif WORKER_TOKEN.fullmatch(token) and per_worker is None:
      per_worker = int(extra.pop()[1:])
    elif WARMUP_TOKEN.fullmatch(token) and warmup is None:
      warmup = int(extra.pop()[2:])
    elif PRECISION_TOKEN.fullmatch(token) and precision is None:
      precision = float(extra.pop()[4:])
    elif MIN_TRIALS_TOKEN.fullmatch(token) and min_trials is None:
      min_trials = int(extra.pop()[2:])
    elif (WEIGHTS_SHARE_TOKEN.fullmatch(token) and weights_share is None
          and _weights_share_allowed(float(token[2:]))):
      weights_share = float(extra.pop()[2:])
    elif (found := BAND_TOKEN.fullmatch(token)) and band is None and (
        0 < float(found[1]) < float(found[2])):
      band = (float(found[1]), float(found[2]))
      extra.pop()
    elif FAR_TOKEN.fullmatch(token) and far is None and float(token[3:]) >= 1:
      far = float(extra.pop()[3:])
    else:
      break
  concurrency = None
  if extra and re.fullmatch(r"gpu[1-9]\d*", extra[-1]):
    concurrency = int(extra.pop()[3:])
  reference = extra.pop(0) if extra else "reuse"
  if (launcher not in LAUNCHERS or build not in LITE_LEVELS
      or reference not in ("reuse", "measure") or extra):
    raise app.UsageError(f"--paths: {path!r} is not {PATH_FORM} "
                         f"with a launcher of {LAUNCHERS}, a build of {', '.join(LITE_LEVELS)}, "
                         "a reference of reuse, measure, N >= 1 judges checking on the GPU "
                         "at once and a timing target of S > 0 seconds")
  if {"again", "prestart"} <= flags_given:
    # The first batch's judges wait, idle, for the second: judges started then would come on top
    # of them, more processes on the GPU than the pool runs at once.
    raise app.UsageError(f"--paths: {path!r}: `again` and `prestart` do not go together (the "
                         "first batch starts the second's judges)")
  return BenchPath(path, launcher, build != "plain", reference == "reuse", concurrency,
                   LITE_LEVELS[build], "nopre" not in flags_given, "serial" not in flags_given,
                   "torchcmp" not in flags_given, "alone" not in flags_given, target,
                   "nonice" not in flags_given, "refafter" not in flags_given,
                   "release" not in flags_given, "nowarm" not in flags_given,
                   "nosetup" not in flags_given, "nofence" not in flags_given,
                   "onejob" not in flags_given, parallel, startups, per_worker,
                   "refregen" not in flags_given, "gcscan" not in flags_given,
                   "wsspawn" not in flags_given, "seqlaunch" not in flags_given, warmup,
                   "pageable" not in flags_given, "secondfirst" not in flags_given,
                   "pristine" not in flags_given, "allseed" in flags_given,
                   "noretime" not in flags_given, precision, min_trials,
                   "regahead" in flags_given, band, "noledger" not in flags_given,
                   "pybind" not in flags_given, "emptyfence" in flags_given,
                   "refinhold" in flags_given, "keptfallback" not in flags_given,
                   "keepall" not in flags_given, "skiplight" in flags_given,
                   "tfirst" in flags_given, "stdtext" in flags_given, weights_share,
                   "again" in flags_given, "prestart" in flags_given,
                   "spread" in flags_given, far)


def _server_env(path: BenchPath):
  """The environment a path's pool starts its warm server with, which its judges and workers
  inherit: KZ_GC_FREEZE (zygote.freeze_imports), KZ_WORKER_SERVER_FORK (judge_host.serve),
  KZ_TRITON_EARLY_LAUNCHERS (triton_precompile._launchers_beside_kernels),
  KZ_SECOND_REFERENCE_AFTER (Judge._second_reference_after), KZ_INPUTS_AGAINST_REFERENCE
  (Judge._inputs_kept), KZ_SEED_ALL_BACKENDS (problem.seed_torch), KZ_LITE_STD_TEXT_ALWAYS
  (lite_build.lite_cuda_source)."""
  wanted = {"KZ_GC_FREEZE": path.gc_freeze, "KZ_WORKER_SERVER_FORK": path.worker_server_fork,
            "KZ_TRITON_EARLY_LAUNCHERS": path.early_launchers,
            "KZ_SECOND_REFERENCE_AFTER": path.second_reference_after,
            "KZ_INPUTS_AGAINST_REFERENCE": path.inputs_against_reference,
            "KZ_SEED_ALL_BACKENDS": path.seed_all_backends,
            "KZ_LITE_STD_TEXT_ALWAYS": path.std_text_always}
  return mock.patch.dict(os.environ, {key: "1" if on else "0" for key, on in wanted.items()})


def judge_processes(rows: list[dict]) -> dict[str, Any]:
  """How many judge processes judged the verdicts of `rows` (evidence["judge_process"]), how
  many jobs one served after its first (judge_host.py), the median of the judge's start-up
  step "device" (its CUDA context, fence included) in first and in later jobs, and how the
  workers were started (evidence["worker_start"]: a "spawn" in a later job is a worker server
  that failed)."""
  first, later, pids, jobs, starts = [], [], set(), 0, {}
  for r in rows:
    ev = r.get("evidence") or {}
    if ev.get("worker_start"):
      starts[ev["worker_start"]] = starts.get(ev["worker_start"], 0) + 1
    process = ev.get("judge_process")
    if not isinstance(process, dict):
      continue
    jobs += 1
    pids.add(process.get("pid"))
    device = ((ev.get("startup_seconds") or {}).get("judge") or {}).get("device")
    (first if process.get("job") == 1 else later).append(device)
  seconds = lambda found: _median([d for d in found if isinstance(d, (int, float))])
  return {"jobs": jobs, "processes": len(pids), "later_jobs": len(later),
          "worker_starts": dict(sorted(starts.items())),
          "first_device_s": seconds(first), "later_device_s": seconds(later),
          "kept_workers": kept_workers(rows)}


def by_kind(rows: list[dict]) -> dict[str, dict[str, Any]]:
  """Each kind of candidate's verdicts (teacher, honest, cheats, faulty/FAULT): how many, their
  statuses, how many were judged again after a kept worker's failure (Judge.run: a second judge,
  in a fresh worker), how many the pool sent to a new worker for their reference's pass rate
  (evidence["worker_choice"]), the median time from start to verdict and of the build stage, and
  of each build step the worker took, over the verdicts that took it (evidence["build_steps"],
  a verdict's calls of one step summed: fast_build.BUILD_STEPS)."""
  kinds: dict[str, list[dict]] = {}
  for r in rows:
    kinds.setdefault(r.get("kind", "?"), []).append(r)
  out = {}
  for kind, group in sorted(kinds.items()):
    stages = [r.get("stage_seconds") or {} for r in group]
    out[kind] = {
        "n": len(group), "statuses": dict(collections.Counter(r["status"] for r in group)),
        "judged_again": sum("judged_again" in (r.get("evidence") or {}) for r in group),
        "sent_to_new_worker": sum(bool(((r.get("evidence") or {}).get("worker_choice") or {})
                                       .get("fresh_worker")) for r in group),
        "median_total_s": _median([s["total"] for s in stages if s.get("total") is not None]),
        "median_build_s": _median([s["build"] for s in stages if s.get("build") is not None]),
        "median_build_steps_s": _build_step_medians(group)}
  return out


def _build_step_medians(rows: list[dict]) -> dict[str, float]:
  """by_kind's median seconds of each build step, over the rows that took it."""
  builds = [(r.get("evidence") or {}).get("build_steps") or [] for r in rows]
  return {name: _median(seconds) for name, seconds in fast_build.step_seconds(builds).items()}


def kept_workers(rows: list[dict]) -> dict[str, Any]:
  """What the kept workers' looks at themselves found (evidence["worker_reuse"]): how many
  served the next job, the medians of the look (the judge's wait, the worker's own check), and
  the commonest reasons one was not kept."""
  looks = [(r.get("evidence") or {}).get("worker_reuse") for r in rows]
  looks = [look for look in looks if isinstance(look, dict)]
  reasons: dict[str, int] = {}
  for look in looks:
    for reason in look.get("drift") or []:
      reasons[reason[:160]] = reasons.get(reason[:160], 0) + 1
  return {"looked": len(looks), "kept": sum(bool(look.get("kept")) for look in looks),
          "park_s": _median([look["park_s"] for look in looks if look.get("park_s") is not None]),
          "check_s": _median([look["check_s"] for look in looks
                              if isinstance(look.get("check_s"), (int, float))]),
          "not_kept_because": dict(sorted(reasons.items(), key=lambda kv: -kv[1])[:4])}


def _verdict_logger(log, meta: list[dict], t0: float) -> Callable:
  """An on_result for SandboxPool.evaluate: each verdict written to `log` as one JSON line when
  it comes (`seconds`: its arrival, from `t0`), so that a run stopped at its time limit keeps
  what finished."""
  def keep(i: int, job: Job, verdict) -> None:
    log.write(json.dumps(dict(meta[i], name=job.name, seconds=round(
        time.perf_counter() - t0, 1), **verdict.to_dict()), default=str) + "\n")
    log.flush()
  return keep


def _first_batch(pool: SandboxPool, jobs: list[Job], meta: list[dict], name: str
                 ) -> dict[str, Any]:
  """Path token `again`: the batch judged once through `pool` before the one that is measured,
  as an RL run's pool judges one step's batch after the last's: its judge processes then stand
  ready (up to SandboxConfig.jobs_per_judge() jobs each) and its references are measured; every
  candidate is built again all the same (a worker builds in a directory of its own). Its
  verdicts go to <out>.<path>.first_batch.verdicts.jsonl as they come; returns its wall time,
  rate and statuses, in job order."""
  log_path = f"{_OUT.value}.{name.replace(':', '_')}.first_batch.verdicts.jsonl"
  t0 = time.perf_counter()
  with open(log_path, "w", encoding="utf-8") as log:
    verdicts = pool.evaluate(jobs, progress=True, on_result=_verdict_logger(log, meta, t0),
                             once_per_candidate=False)
  wall = time.perf_counter() - t0
  return {"wall_s": round(wall, 1), "per_minute": round(60 * len(jobs) / wall, 1),
          "statuses": [v.status for v in verdicts]}


def run() -> dict:
  jobs, meta = make_batch(_KB.value, _BACKENDS.value, _COPIES.value, _MAX_TEACHER.value)
  if _SHUFFLE_SEED.value is not None:  # the same order on every path
    order = list(range(len(jobs)))
    random.Random(_SHUFFLE_SEED.value).shuffle(order)
    jobs, meta = [jobs[i] for i in order], [meta[i] for i in order]
  device = _DEVICE.value
  base = SandboxConfig(device=device, timing=_TIMING.value and device == "cuda",
                       gpu_concurrency=_GPU_CONCURRENCY.value)
  if _TIMING_TARGET.value is not None:
    base = dataclasses.replace(base, timing_target_s=_TIMING_TARGET.value)
  paths = [parse_path(path) for path in _PATHS.value]
  if len({path.name for path in paths}) != len(paths):
    raise app.UsageError(f"--paths: {_PATHS.value} names a path twice")
  if device == "cuda" and "cuda" in _BACKENDS.value and any(path.fast for path in paths):
    from kernelzero_jax.sandbox import fast_build  # pylint: disable=import-outside-toplevel
    t0 = time.perf_counter()
    header = fast_build.ensure_pch(fast_build.default_cache_dir(), with_cuda=True)
    print(f"precompiled header {header}: ready in {time.perf_counter() - t0:.1f} s "
          "(built once per machine)")
    if any(path.lite for path in paths):  # else a lite path's judges build the fast way unseen
      fast_build.require_lite(header)
    if any(path.lite == 3 for path in paths):
      fast_build.require_bind(header)
  results = {}
  for path in paths:
    name, lite = path.name, path.lite
    target = path.timing_target_s or base.timing_target_s
    config = dataclasses.replace(base, timing_target_s=target, fast_build=path.fast,
                                 reuse_reference=path.reuse,
                                 gpu_concurrency=path.concurrency or base.gpu_concurrency,
                                 lite_cuda_header=lite >= 1, lite_main_cpp=lite >= 2,
                                 lite_bind_pch=lite == 3,
                                 triton_precompile=path.precompile,
                                 cuda_prebuild=path.precompile,
                                 concurrent_reference=path.concurrent, fused_compare=path.fused,
                                 wide_checks=path.wide,
                                 build_nice=base.build_nice if path.niced else 0,
                                 reference_first=path.reference_first,
                                 keep_memory_between_holds=path.keep_memory,
                                 judge_warm_up=path.warm_up,
                                 setup_kernel_ms_limit=(
                                     base.setup_kernel_ms_limit if path.setup_profiled
                                     else None),
                                 startup_fence=path.fenced,
                                 startups_at_once=(
                                     base.startups_at_once if path.startups_at_once is None
                                     else path.startups_at_once),
                                 jobs_per_judge_process=(
                                     base.jobs_per_judge_process if path.judges_serve_several
                                     else 1),
                                 candidates_per_worker=(
                                     base.candidates_per_worker
                                     if path.candidates_per_worker is None
                                     else path.candidates_per_worker),
                                 reference_reuses_inputs=path.reference_reuses_inputs,
                                 warmup=base.warmup if path.warmup is None else path.warmup,
                                 registered_uploads=path.registered_uploads,
                                 retime_disturbed=(base.retime_disturbed if path.retime_disturbed
                                                   else 0),
                                 timing_precision=(
                                     base.timing_precision if path.timing_precision is None
                                     else path.timing_precision or None),
                                 min_trials=(base.min_trials if path.min_trials is None
                                             else path.min_trials),
                                 register_uploads_ahead=(base.register_uploads_ahead
                                                         or path.register_ahead),
                                 speedup_band=path.speedup_band or base.speedup_band,
                                 weights_ledger=base.weights_ledger and path.weights_ledger,
                                 lite_capi_main=base.lite_capi_main and path.capi_main,
                                 fence_empty_uploads=(base.fence_empty_uploads
                                                      or path.fence_empty_uploads),
                                 reference_upload_in_hold=(base.reference_upload_in_hold
                                                           or path.reference_upload_in_hold),
                                 fresh_worker_for_fallback_builds=(
                                     base.fresh_worker_for_fallback_builds
                                     and path.fresh_worker_for_fallback_builds),
                                 keep_worker_min_pass_rate=(
                                     base.keep_worker_min_pass_rate if path.choose_workers
                                     else 0.0),
                                 skip_light_after_lite_errors=(
                                     base.skip_light_after_lite_errors or path.skip_light),
                                 timings_first=base.timings_first or path.timings_first,
                                 job_order="spread" if path.spread else base.job_order,
                                 band_far_factor=(base.band_far_factor
                                                  if path.band_far_factor is None
                                                  else path.band_far_factor),
                                 weights_kept_share=(
                                     base.weights_kept_share if path.weights_kept_share is None
                                     else path.weights_kept_share))
    parallel = path.parallel or _PARALLEL.value
    # Each verdict as it comes, so that a run stopped at its time limit keeps what finished.
    log_path = f"{_OUT.value}.{name.replace(':', '_')}.verdicts.jsonl"
    with contextlib.ExitStack() as stack:
      stack.enter_context(_server_env(path))
      pool = stack.enter_context(
          SandboxPool(config, max_parallel=parallel, launcher=path.launcher))
      started = time.perf_counter()
      if _WARM_UP.value:
        pool.warm_up(_BACKENDS.value, wait=True)
      server_start = time.perf_counter() - started
      first_batch = _first_batch(pool, jobs, meta, name) if path.second_batch else None
      judges_started = pool.start_judges() if path.prestart else None
      log = stack.enter_context(open(log_path, "w", encoding="utf-8"))
      cpu = stack.enter_context(CpuLoad())
      clocks = stack.enter_context(GpuClocks(enabled=device == "cuda"))
      t0 = time.perf_counter()
      # Every copy is judged: copies stand for a group's distinct candidates, whose judging
      # (and sharing of reference facts) is what this measures.
      verdicts = pool.evaluate(jobs, progress=True, on_result=_verdict_logger(log, meta, t0),
                               once_per_candidate=False)
    wall = time.perf_counter() - t0
    rows = [dict(m, name=j.name, **v.to_dict()) for j, m, v in zip(jobs, meta, verdicts)]
    by_backend = {}
    for backend in _BACKENDS.value:
      mine = [r for r in rows if r["backend"] == backend]
      by_backend[backend] = {
          stage: _median([r["stage_seconds"][stage] for r in mine
                          if stage in r["stage_seconds"]]) for stage in STAGES}
    startup = _startup_medians(rows)
    spread = copy_spread(rows)
    after = after_forward(rows)
    overhead = timing_calls_beyond(rows, config.warmup, config.num_audits)
    messages = message_costs(rows)
    waits = check_waits(rows, config.num_correct_trials - 1)
    wall_ratios = timing_wall_ratios(rows, config.warmup, config.num_audits)
    steps = _step_medians([(r.get("evidence") or {}).get("gpu_seconds") for r in rows])
    # from the build's end to the first hold's request (judge.py: nothing of it holds the GPU)
    to_hold = _median([ev["build_to_hold_s"] for r in rows
                       if "build_to_hold_s" in (ev := r.get("evidence") or {})])
    holds = hold_timeline(rows)
    gaps = timing_gaps(rows)
    started = new_workers(rows, config.worker_candidates())
    left = left_after_release(rows)
    count = lambda key: sum(bool((r.get("evidence") or {}).get(key)) for r in rows)
    reused, alone, wide, oom, weights = (
        count(k) for k in ("reference_reused", "checks_alone", "check_width", "shared_gpu_oom",
                           "weights_apart"))
    first = sum(bool(((r.get("evidence") or {}).get("reference_first") or {}).get("held"))
                for r in rows)
    precompiled = side_worker_summary(rows, "triton_precompile", "with_kernels",
                                      lambda p: bool(p.get("kernels")))
    prebuilt = side_worker_summary(rows, "cuda_prebuild", "built", lambda p: p.get("ok") is True)
    fused_summary = fused_compare_summary(rows)
    apart = start_ups_apart(rows)
    beside = timings_beside_startups(rows)
    disturbed = disturbed_timings(rows)
    classes = disturbance_classes(rows)
    trials = timing_trials_summary(rows)
    load = cpu.summary(items=len(rows))
    served = judge_processes(rows)
    kinds = by_kind(rows)
    clock = dict(timing_clocks(rows, clocks.samples), error=clocks.error)
    results[name] = {"wall_s": round(wall, 1), "num": len(rows),
                     "server_start_s": round(server_start, 1) if _WARM_UP.value else None,
                     "per_minute": round(60 * len(rows) / wall, 1), "max_parallel": parallel,
                     "cpu_load": load, "gpu_clocks": clock,
                     "gpu_concurrency": config.gpu_concurrency, "reference_reused": reused,
                     "reference_first": first,
                     "checks_alone": alone, "checks_wide": wide, "shared_gpu_oom": oom,
                     "weights_apart": weights, "weights_kept_share": config.weights_kept_share,
                     "triton_precompile": precompiled, "cuda_prebuild": prebuilt,
                     "fused_compare": fused_summary,
                     "medians": by_backend,
                     "startup_medians": startup, "gpu_step_medians": steps,
                     "build_to_hold_s": to_hold,
                     "gpu_holds": holds, "timing_gaps": gaps, "new_workers": started,
                     "left_after_release": left,
                     "timing_target_s": config.timing_target_s,
                     "timing_precision": config.timing_precision,
                     "min_trials": config.min_trials, "warmup": config.warmup,
                     "speedup_band": config.speedup_band,
                     "band_far_factor": config.band_far_factor,
                     "timing_trials": trials, "copy_spread": spread, "after_forward": after,
                     "trial_overhead": overhead, "messages": messages,
                     "check_waits": waits, "timing_wall_ratios": wall_ratios,
                     "start_ups_apart": apart, "timings_beside_startups": beside,
                     "disturbed_timings": disturbed, "disturbance_classes": classes,
                     "judge_processes": served, "by_kind": kinds, "rows": rows}
    if judges_started is not None:
      results[name]["judges_started"] = judges_started
      print(f"\n{name}: {judges_started['started']} judge processes started ahead of the batch "
            f"in {judges_started['seconds']} s (not counted in its time); failed: "
            f"{judges_started['failed'][:3]}")
    if first_batch is not None:
      results[name]["first_batch"] = {
          "wall_s": first_batch["wall_s"], "per_minute": first_batch["per_minute"],
          "statuses_as_second": first_batch["statuses"] == [r["status"] for r in rows]}
      print(f"\n{name}: the pool's first batch, {len(rows)} candidates in "
            f"{first_batch['wall_s']} s ({first_batch['per_minute']} per minute), every status "
            f"as in the second (measured below): "
            f"{results[name]['first_batch']['statuses_as_second']}")
    print(f"\n{name}: {len(rows)} candidates in {wall:.1f} s "
          f"({results[name]['per_minute']} per minute; {reused} reused a measured reference, "
          f"{first} measured it before their candidate ran; "
          f"{parallel} judges at once, {config.gpu_concurrency} checking on the GPU at once, "
          f"{wide} holding several slots "
          f"and {alone} checked alone for memory, {weights} alone for their weights, {oom} "
          "judged again after running out of GPU memory)")
    print(f"CPU ({load['cores']} cores): busy {load['busy_pct']}% (niced {load['nice_pct']}%, "
          f"I/O wait {load['iowait_pct']}%), saturated (>= 95%) in {load['saturated_pct']}% of "
          f"the seconds; {load['busy_core_s_per_item']} busy core-seconds per candidate")
    print(f"judge processes: {served['processes']} for {served['jobs']} jobs, "
          f"{served['later_jobs']} jobs served by a process after its first; judge start-up "
          f"'device' (its CUDA context) median {served['first_device_s']} s in first jobs, "
          f"{served['later_device_s']} s in later ones; workers started by "
          f"{served['worker_starts']}")
    if served["kept_workers"]["looked"]:
      print(f"kept workers: {json.dumps(served['kept_workers'])}")
    print(f"by kind: {json.dumps(kinds)}")
    if clock["samples"]:
      print(f"GPU clocks ({clock['samples']} samples): {clock['run']}; timed copies over "
            f"their copies' median by more than 10%, with the clocks of their timing hold and "
            f"their twins': {json.dumps(clock['outliers'])}")
    elif clock["error"]:
      print(f"GPU clocks: not sampled ({clock['error']})")
    if precompiled["started"]:
      print(f"Triton precompiler: {precompiled['with_kernels']} of {precompiled['started']} "
            f"compiled kernels, median wait {precompiled['median_waited_s']} s; "
            f"errors: {precompiled['errors']}")
    if prebuilt["started"]:
      print(f"CUDA prebuilder: {prebuilt['built']} of {prebuilt['started']} built, median wait "
            f"{prebuilt['median_waited_s']} s; errors: {prebuilt['errors']}")
    if fused_summary["judges"]:
      print(f"fused comparison: {fused_summary['judges']} judges compiled it (median "
            f"{fused_summary['median_compile_s']} s, waited for "
            f"{fused_summary['median_join_s']} s, loaded in {fused_summary['median_load_s']} s), "
            f"{fused_summary['fused']} comparisons by it, "
            f"{fused_summary['fallbacks']} by torch; errors: {fused_summary['errors']}")
    print(f"{'candidate':58s} {'status':14s} " + " ".join(f"{s:>11s}" for s in STAGES))
    for r in rows:
      s = r["stage_seconds"]
      cells = " ".join(f"{s[k]:11.2f}" if k in s else f"{'-':>11s}" for k in STAGES)
      print(f"{r['name'][:58]:58s} {r['status']:14s} {cells}")
    for backend, med in by_backend.items():
      print(f"median {backend}: " + ", ".join(f"{k} {v}" for k, v in med.items()))
    for side, med in startup.items():  # what the build stage is made of
      print(f"median {side} start-up steps (s): " + ", ".join(f"{k} {v}" for k, v in med.items()))
    # ...and what a candidate's GPU time (correctness, timing) is made of
    print("median steps after the build (s): " + ", ".join(f"{k} {v}" for k, v in steps.items())
          + f"; from the build's end to the first hold's request {to_hold}")
    if holds["holds"]:  # ...and how the judges' holds lay side by side (gpu_steps.hold_timeline)
      print("GPU holds side by side: " + ", ".join(f"{k} {v}" for k, v in holds.items()))
    if gaps["gaps"]:  # ...and what the gaps between timings held (gpu_steps.timing_gaps)
      print("gaps between timings: " + ", ".join(f"{k} {v}" for k, v in gaps.items()))
    if started["started"]:  # ...and the workers started, whose start-ups the fence held
      print("new workers by why: " + ", ".join(f"{k} {v}" for k, v in started.items()))
    if left["releases"]:  # ...and what judges kept allocated when they let go of a hold
      print("allocated after a release: " + ", ".join(f"{k} {v}" for k, v in left.items()))
    print(f"timing trials (target {config.timing_target_s} s, precision "
          f"{config.timing_precision}, at least {config.min_trials}, {config.warmup} warm-ups, "
          f"speedup band {config.speedup_band}, far factor {config.band_far_factor}): "
          + json.dumps(trials))
    if spread["problems"]:
      print(f"timing target {config.timing_target_s} s: a candidate's time over its copies "
            f"spreads by {spread['median_pct']}% (median over {spread['problems']} problems; "
            f"max {spread['max_pct']}%)")
    print("start-up fence waits summed (s): "
          + (", ".join(f"{k} {v}" for k, v in apart["fence_wait_s"].items()) or "none")
          + f"; setup profiled in {apart['setup_profiled']} verdicts, the profiler's cost "
          f"{apart['setup_profiler_s']} s summed, longest setup kernels "
          f"{apart['setup_kernel_ms_max']} ms")
    print("timings against their copies' median (%), beside another judge's start-up and clear "
          "of one: " + json.dumps(beside))
    print("timings disturbed by other candidates' kernels outside every hold: "
          + json.dumps(disturbed))
    print("told timings against their problem's median, by what was told (candidate, reference "
          "ratios): " + json.dumps(classes))
    if after["timed"]:
      print(f"timed intervals past forward's end on its stream: median {after['median_ms']} ms, "
            f"max {after['max_ms']} ms, {after['over_1ms']} of {after['timed']} over 1 ms")
    for side, o in overhead.items():
      if o["said"]["n"]:
        print(f"a {side} timing trial beyond its measurement (median of {o['said']['n']}): "
              f"{o['said']['beyond_ms']} ms, its input set {o['said']['inputs_ms']} ms of it")
    if waits["n"]:  # ...what a check's exchange held beyond its forwards (gpu_steps)
      print(f"a check's exchange beyond both forwards (median of {waits['n']}, input sets "
            f"counted in {waits['inputs_counted']}): {waits['median_ms']} ms, "
            f"{waits['min_ms']}-{waits['max_ms']} ms")
    if wall_ratios["n"]:  # ...and how the judges' clock bounds the timings they were told
      print(f"a timing's held time over its calls' said time: median {wall_ratios['median']}, "
            f"{wall_ratios['min']}-{wall_ratios['max']} (with input sets counted: "
            f"{wall_ratios['inputs_counted'].get('median')}, max "
            f"{wall_ratios['inputs_counted'].get('max')})")
    for cmd, m in messages.items():  # the judges' exchanges with their workers (gpu_steps)
      print(f"exchanges of '{cmd}' ({m['n']}), per message (ms): "
            + ", ".join(f"{k} {v}" for k, v in m["per_message_ms"].items()))
    _write({"summary": {"device": device, "timing": base.timing, "num_candidates": len(jobs),
                        "complete": False}, "results": results})  # kept if a later path is stopped

  summary = {"device": device, "timing": base.timing, "num_candidates": len(jobs),
             "complete": True}
  names = list(results)
  # Each later path against the first: its verdicts and its speed (with two paths, at the top
  # of the summary; with more, also under "versus_first").
  for other in names[1:]:
    a, b = results[names[0]]["rows"], results[other]["rows"]
    key = lambda r: (r["status"], r["stage"], r["correct"])
    differ = [{"name": x["name"], names[0]: key(x), other: key(y),
               "reasons": [x["reasons"][:1], y["reasons"][:1]]}
              for x, y in zip(a, b) if key(x) != key(y)]
    versus = {
        "verdicts_agree": not differ, "differences": differ,
        "times_against_first": times_against(a, b),
        "throughput_ratio": round(results[names[0]]["per_minute"]
                                  / results[other]["per_minute"], 2),
        "median_total_ratio": {
            backend: (round(results[other]["medians"][backend]["total"]
                            / results[names[0]]["medians"][backend]["total"], 2)
                      if results[names[0]]["medians"][backend]["total"] else None)
            for backend in _BACKENDS.value}}
    if other == names[1]:
      summary.update(versus)
    if len(names) > 2:
      summary.setdefault("versus_first", {})[other] = versus
    print(f"\n{names[0]} vs {other}: throughput x{versus['throughput_ratio']}, median "
          f"total time x{versus['median_total_ratio']} faster; verdicts agree: "
          f"{versus['verdicts_agree']}; its times and speedups against the first's (%): "
          f"{json.dumps(versus['times_against_first'])}")
    for d in differ:
      print("  differs:", json.dumps(d)[:400])
  for n in names:
    summary[n] = {k: v for k, v in results[n].items() if k != "rows"}
  _write({"summary": summary, "results": results})
  print(json.dumps({k: v for k, v in summary.items() if k != "differences"}))
  return summary


def start_ups_apart(rows: list[dict]) -> dict[str, Any]:
  """What keeping GPU work outside the holds apart from timings cost the batch: the seconds the
  judges waited for the start-up fence, summed by step (evidence["fence_wait_s"];
  SandboxConfig.startup_fence), and for the profiled imports and constructors
  (evidence["setup_gpu"]; SandboxConfig.setup_kernel_ms_limit) how many verdicts have them, the
  profiler's own seconds summed, and the most kernel time one of them ran."""
  waits: dict[str, float] = {}
  profiled, profiler_s, kernel_ms = 0, 0.0, 0.0
  for r in rows:
    ev = r.get("evidence") or {}
    for step, waited in (ev.get("fence_wait_s") or {}).items():
      waits[step] = round(waits.get(step, 0.0) + waited, 3)
    setup = ev.get("setup_gpu") or {}
    profiled += bool(setup)
    for part in setup.values():
      profiler_s += part.get("profiler_s", 0.0)
      kernel_ms = max(kernel_ms, part.get("kernel_ms", 0.0))
  return {"fence_wait_s": dict(sorted(waits.items())), "setup_profiled": profiled,
          "setup_profiler_s": round(profiler_s, 3), "setup_kernel_ms_max": kernel_ms}


def side_worker_summary(rows: list[dict], key: str, done_name: str,
                        done: Callable[[dict], bool]) -> dict[str, Any]:
  """How the workers beside the candidates' workers went (evidence[key]: "triton_precompile"
  or "cuda_prebuild"): how many started, how many did their job (`done`, counted as
  `done_name`), the median wait for them, the medians of the steps they timed (a precompiler's
  kernels_s and launchers_s), the launchers built beside the kernels' compiles, the first few
  distinct errors."""
  pre = [(r.get("evidence") or {}).get(key) or {} for r in rows]
  out = {"started": sum(bool(p) for p in pre), done_name: sum(bool(done(p)) for p in pre),
         "median_waited_s": _median([p["waited_s"] for p in pre if "waited_s" in p]),
         "errors": sorted({p["error"][:100] for p in pre if p.get("error")})[:5]}
  for step in ("kernels_s", "launchers_s"):
    if any(step in p for p in pre):
      out[f"median_{step}"] = _median([p[step] for p in pre if step in p])
  if any("launchers_early" in p for p in pre):
    out["launchers_early"] = sum(p.get("launchers_early", 0) for p in pre)
  return out


def fused_compare_summary(rows: list[dict]) -> dict[str, Any]:
  """How the judges' fused comparison went (evidence["fused_compare"]): how many compiled it,
  the median compile time, the median wait for it and load of it (into the judge's CUDA
  context), comparisons it made and left to torch, the first distinct errors."""
  fused = [(r.get("evidence") or {}).get("fused_compare") or {} for r in rows]
  return {"judges": sum(bool(f) for f in fused),
          "median_compile_s": _median([f["compile_s"] for f in fused if "compile_s" in f]),
          "median_join_s": _median([f["join_s"] for f in fused if "join_s" in f]),
          "median_load_s": _median([f["load_s"] for f in fused if "load_s" in f]),
          "fused": sum(f.get("fused", 0) for f in fused),
          "fallbacks": sum(f.get("fallbacks", 0) for f in fused),
          "errors": sorted({f["error"][:100] for f in fused if f.get("error")})[:5]}


def copy_spread(rows: list[dict]) -> dict[str, Any]:
  """How far the timed copies of one candidate disagree: (max - min) / median of their
  candidate_ms, in percent, per candidate with two or more timed copies; the median and the
  maximum of that over candidates. Copies run the same kernel on the same problem, so this is
  the timing's own noise (plus the GPU's state)."""
  times: dict[tuple, list[float]] = {}
  for r in rows:
    if r.get("kind") == "teacher" and r.get("candidate_ms"):
      times.setdefault((r["problem"], r["backend"]), []).append(r["candidate_ms"])
  pcts = [100 * (max(t) - min(t)) / statistics.median(t) for t in times.values() if len(t) > 1]
  return {"problems": len(pcts), "median_pct": _median(pcts),
          "max_pct": round(max(pcts), 3) if pcts else None}


def after_forward(rows: list[dict]) -> dict[str, Any]:
  """What the candidates' timed intervals held past the end of forward's work on its stream
  (evidence["timing_after_forward_ms"], timing.py): the median and the maximum over candidates,
  and how many held more than 1 ms. The host's wake-up from the synchronize is most of it, so
  this says how much a busy CPU still stretches the timings."""
  values = [a["candidate"] for r in rows
            if "candidate" in (a := (r.get("evidence") or {}).get("timing_after_forward_ms") or {})]
  return {"timed": len(values),
          "median_ms": round(statistics.median(values), 4) if values else None,
          "max_ms": round(max(values), 4) if values else None,
          "over_1ms": sum(v > 1.0 for v in values)}


def _write(payload: dict) -> None:
  atomic_file.write_json(_OUT.value, payload, indent=1, default=str)


def main(argv):
  del argv
  run()


if __name__ == "__main__":
  app.run(main)
