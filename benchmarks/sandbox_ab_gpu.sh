#!/usr/bin/env bash
# The sandbox's defaults, each against the way it replaced, side by side in one
# benchmarks.sandbox_throughput run (same machine, same candidates); BENCHMARKS.md, "Five sandbox
# changes", has what they gave on an H200 on 2026-12-05 (at fad24cd and 4d2bd7f):
#
#   bash benchmarks/sandbox_ab_gpu.sh OUT_DIR RUN [KERNELBENCH_DIR]
#
# RUN is one of
#   l2batch  36 level-2 CUDA candidates (4 copies of 9 problems), 24 judges at once: the default
#            against `pageable` (models moved from pageable memory, as before registered uploads
#            were the default; run at fad24cd as `regup` the other way round) and `wu1` (one
#            warm-up call per timing)
#   l1batch  level-1 CUDA candidates (2 copies), 24 judges at once: the default against
#            `pristine` (each check's inputs copied before the reference's forward, as before
#            Judge._inputs_kept) and `allseed` (input sets seeded by torch.manual_seed, as before
#            problem.seed_torch)
#   triton   Triton candidates one at a time: the default against `secondfirst` (the
#            reference's second model built before its first timing), `pristine`, `allseed` and
#            `w16`
#            (a worker serving up to 16 candidates instead of 8: in the last such run the 9th
#            candidate, level 1 problem 47, waited 0.37 s for its new worker's CUDA context)
#   b70      the batch of 70 CUDA candidates (2 copies of the teacher's 27 kernels and the 16
#            honest and cheating candidates), 24 judges at once: the default against `pageable`
#            and `w16` (run at 4d2bd7f as the old default against `regup:w16`)
#   b259     the batch of 259 (9 copies; the 256), the paths of $B259_PATH
#            (comma-separated), by default the default path (about 3-4 minutes; COPIES changes
#            the 9); a path ending in `:again` judges the batch twice through one pool and
#            measures the second, its judges kept from the first (an RL step's pool keeps them
#            only where the step came within zygote.JUDGE_IDLE_S, 30 s; twice as long); one
#            with `:prestart` starts the pool's judges before the batch (start_judges); one with
#            `:spread` starts each problem's jobs evenly over the batch (SandboxConfig.job_order)
#   rlmix    a batch that fails as an RL step's does: each of the teacher's 27 CUDA kernels
#            $COPIES times (default 2) and $FAULT_COPIES (default 2) copies of each failing
#            variant of it ($RLMIX_FAULTS of benchmarks/faulty_candidates.py, by default compile,
#            runtime, torchop; `undeclared` fails where a model's kernels usually do), 216
#            candidates, 3 in 4 failing; 24 judges at once; the paths of $RLMIX_PATH, by default
#            the default (a worker kept for up to 8 candidates, a failure in a kept worker judged
#            again in a fresh one) against `w1` (a fresh worker for every candidate); path
#            token `keptfallback`: a kept worker also for a candidate whose lite build failed
#            (BENCHMARKS.md, "A batch that fails as an RL step's does": on an H100 w1 was
#            1.19-1.32x the default before b344b1e, which gave 1.11x over `keptfallback`);
#            `keepall`: a kept worker for any candidate, not only where its reference passed
#            half the time so far (BENCHMARKS.md, "Kept workers by pass rate")
#   overhead benchmarks.trial_overhead (about a minute): what a candidate's timing trial costs
#            beyond its measured time, and where it goes (on 2026-12-05: the fresh input set,
#            2.5-3.4 ms of GPU work for the 6-8 GiB problems), for 4 problems
#   builds   benchmarks.cuda_build (about 4 minutes, once the precompiled headers are built): the
#            honest CUDA candidates and the teacher's CUDA kernels built one at a time with
#            main.cpp bound through pybind11 (`lite_pch`, as before 2026-12-06) and through
#            CPython's API (`lite_capi`, the default: SandboxConfig.lite_capi_main), each
#            build's seconds and its compilers' CPU seconds; $BUILD_MODES other modes,
#            $BUILD_FAULT a fault injected into every candidate (BUILD_FAULT=undeclared
#            BUILD_MODES=lite_capi,lite_skip,plain: what each step of a compile error's fallback
#            chain costs, and the chain without the fast build)
#   ipc      benchmarks.cuda_ipc (under a minute): what handing a check's tensors from the worker
#            to the judge by CUDA IPC costs, by size, against buffers the judge shared once
#   disturb  8 copies of two problems' teacher kernels (level 1 problem 19, level 2 problem 95),
#            the honest extras and 6 copies of cheats/busy_at_import (2 s of GPU kernels at
#            import, where no judge holds the GPU), 24 judges at once: timings that those kernels
#            disturbed made again (the default) against only told (`noretime`), in one shuffled
#            order; about 3 minutes (COPIES, CHEATS and PARALLEL change the counts)
# Each run takes about 3-5 minutes on an H200 (triton: 5 paths of 21 candidates, about 5). Writes
# OUT_DIR/RUN.tgz (the summary, the verdicts of every path, the console output) and prints the
# summary's last lines.
set -uo pipefail
out=${1:?output directory}; run=${2:?run: l2batch, l1batch, triton, b70, b259, rlmix, overhead, builds, ipc or disturb}; kb=${3:-.kb}
mkdir -p "$out/$run"
common=(--kernelbench_dir="$kb" --out="$out/$run/tp_$run.json")
case "$run" in
  l2batch) args=(--backends=cuda --extras=false --problem_regex='level2/' --copies=4
                 --max_parallel=24 --timing_target_s=0.25
                 --paths=zygote:lite_pch:reuse:gpu4,zygote:lite_pch:reuse:gpu4:pageable,zygote:lite_pch:reuse:gpu4:wu1) ;;
  l1batch) args=(--backends=cuda --extras=false --problem_regex='level1/' --copies=2
                 --max_parallel=24 --timing_target_s=0.25
                 --paths=zygote:lite_pch:reuse:gpu4,zygote:lite_pch:reuse:gpu4:pristine,\
zygote:lite_pch:reuse:gpu4:allseed) ;;
  triton) args=(--backends=triton --max_teacher=4 --max_parallel=1
                --paths=zygote:lite_pch:t0.25,zygote:lite_pch:t0.25:secondfirst,zygote:lite_pch:t0.25:pristine,\
zygote:lite_pch:t0.25:allseed,zygote:lite_pch:t0.25:w16) ;;
  b70) args=(--backends=cuda --copies=2 --max_parallel=24 --timing_target_s=0.25
             --paths=zygote:lite_pch:reuse:gpu4,zygote:lite_pch:reuse:gpu4:pageable,\
zygote:lite_pch:reuse:gpu4:w16) ;;
  b259) args=(--backends=cuda --copies=${COPIES:-9} --max_parallel=24 --timing_target_s=0.25
              --paths="${B259_PATH:-zygote:lite_pch:reuse:gpu4}") ;;
  rlmix) args=(--backends=cuda --extras=false --copies=${COPIES:-2}
               --faults=${RLMIX_FAULTS:-compile,runtime,torchop}
               --fault_copies=${FAULT_COPIES:-2} --max_parallel=24 --timing_target_s=0.25
               --paths="${RLMIX_PATH:-zygote:lite_pch:reuse:gpu4,zygote:lite_pch:reuse:gpu4:w1}") ;;
  disturb) args=(--backends=cuda --problem_regex='level(1/19|2/95)_' --copies=${COPIES:-8}
                 --cheat_regex=busy_at_import --cheat_copies=${CHEATS:-6} --shuffle_seed=0
                 --max_parallel=${PARALLEL:-24}
                 --timing_target_s=0.25
                 --paths=zygote:lite_pch:reuse:gpu4,zygote:lite_pch:reuse:gpu4:noretime) ;;
  overhead|ipc|builds) ;;
  *) echo "unknown run $run" >&2; exit 2 ;;
esac
# The commit, and a digest of the Python sources that ran: a copy of a working tree may carry a
# .git older than its files (on 2026-12-05 one said d64e243 for code at 4c5197b), so the digest
# is what ties a result to a commit (the same command on that commit's checkout prints it).
{ git rev-parse HEAD; echo "sources $(find kernelzero_jax benchmarks -name '*.py' | LC_ALL=C sort \
    | xargs cat | sha1sum | cut -c1-40)"; } > "$out/$run/commit.txt" 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/$run/gpu.txt" 2>/dev/null
# The host's CPU and kernel too: the same path ran 16% slower on one fresh machine than on another
# of the same kind (BENCHMARKS.md, "Kept workers by pass rate"), and a batch is mostly CPU-bound.
{ lscpu | grep -E 'Model name|^CPU\(s\)|MHz'; uname -r; nproc; } > "$out/$run/cpu.txt" 2>/dev/null
if [ "$run" = overhead ]; then
  timeout "${LIMIT_S:-560}" python -m benchmarks.trial_overhead --kernelbench_dir="$kb" \
      --out="$out/$run/trial_overhead.json" > "$out/$run/console.txt" 2>&1
elif [ "$run" = builds ]; then
  timeout "${LIMIT_S:-560}" python -m benchmarks.cuda_build \
      --modes="${BUILD_MODES:-lite_pch,lite_capi}" --fault="${BUILD_FAULT:-}" \
      --teacher_kernelbench_dir="$kb" --out="$out/$run/cuda_build.json" \
      > "$out/$run/console.txt" 2>&1
elif [ "$run" = ipc ]; then
  timeout "${LIMIT_S:-560}" python -m benchmarks.cuda_ipc --out="$out/$run/cuda_ipc.json" \
      > "$out/$run/console.txt" 2>&1
else
  timeout "${LIMIT_S:-560}" python -m benchmarks.sandbox_throughput "${common[@]}" "${args[@]}" \
      > "$out/$run/console.txt" 2>&1
fi
echo "$run: exit $?"
tail -30 "$out/$run/console.txt" | cut -c1-300
gzip -f "$out/$run"/*.jsonl "$out/$run"/*.json 2>/dev/null
tar czf "$out/$run.tgz" -C "$out" "$run" && rm -rf "${out:?}/$run"
