#!/usr/bin/env bash
# The rule-based teacher on a GPU: as a baseline Coder on KernelBench levels 1 and 2, and its own
# pass rate and speedups on full-size modules of its family (issue 8). One backend per run:
#
#   bash benchmarks/teacher_gpu.sh triton OUT_DIR    # or: cuda
#
# Needs the KernelBench problems in .kb/ (mkdir .kb && cp -r ../shared/kernelbench/level{1,2} .kb/).
# Writes OUT_DIR/teacher_kernelbench_BACKEND.{md,json,jsonl} and
# OUT_DIR/teacher_full_BACKEND.{json,jsonl}: the eval report, summary and verdicts, then the
# make_teacher_data report (pass rate and failures) and its pairs (meta.speedup per module).
set -euo pipefail
backend=${1:?backend: triton or cuda}
out=${2:?output directory}
num_full=${NUM_FULL:-24}
work=$(mktemp -d)
mkdir -p "$out"
start=$(date +%s)
python -m experiments.eval_kernelbench --teacher --backend="$backend" --kernelbench_dir=.kb \
    --levels=1,2 --num_samples=1 --workdir="$work/kb" > "$work/kb.log" 2>&1 || true
cp "$work/kb/report.md" "$out/teacher_kernelbench_$backend.md" || tail -50 "$work/kb.log"
cp "$work/kb/summary.json" "$out/teacher_kernelbench_$backend.json" || true
cp "$work/kb/verdicts.jsonl" "$out/teacher_kernelbench_$backend.jsonl" || true
echo "kernelbench $backend: $(( $(date +%s) - start )) s"
python -m experiments.make_teacher_data --num_modules="$num_full" --seed=0 --split=train \
    --backend="$backend" --device=cuda --size=full --out="$out/teacher_full_$backend.jsonl" \
    > "$work/full.json" 2> "$work/full.log" || tail -50 "$work/full.log"
tail -1 "$work/full.json" > "$out/teacher_full_$backend.json" || true
echo "full-size $backend: $(( $(date +%s) - start )) s"
python - "$out" "$backend" <<'PY'
import json, math, sys
out, backend = sys.argv[1:]
s = json.load(open(f"{out}/teacher_kernelbench_{backend}.json"))["levels"]
for level, g in s.items():
  print(f"KernelBench {level}: problems {g['num_problems']} correct {g['num_correct']} "
        f"pass@1 {g['pass_at_k'].get('pass@1')} fast_1 {g['fast_p'].get('fast_1')} "
        f"geomean {g['geomean_speedup']}")
r = json.load(open(f"{out}/teacher_full_{backend}.json"))
sp = [json.loads(l)["meta"]["speedup"] for l in open(f"{out}/teacher_full_{backend}.jsonl")]
sp = [x for x in sp if x]
print(f"full-size modules: {r['num_pairs']}/{r['num_modules']} correct, by kind "
      f"{ {k: v['pass_rate'] for k, v in r['by_kind'].items()} }, speedup geomean "
      f"{math.exp(sum(map(math.log, sp)) / len(sp)) if sp else None:.3} min {min(sp, default=None)} "
      f"max {max(sp, default=None)}")
PY
