#!/usr/bin/env bash
# One round of co-evolution with small random-weight policies on one GPU, for each backend
# (experiments/configs/coevolve_gpu_random.py), then module validation over honest modules
# (benchmarks/module_validation.py: KernelBench level 2 and 32 full-size teacher modules):
#
#   bash benchmarks/coevolve_gpu.sh OUT_DIR [KERNELBENCH_DIR]
#
# Writes OUT_DIR/coevolve_gpu.tgz (each run's phases.json, metrics.jsonl, console output, and the
# validation verdicts) and prints the per-phase summaries and the validation summary. Installs
# ml_collections from .whl/ when the machine lacks it. SKIP_VALIDATION=1 runs the rounds only.
set -uo pipefail
out=${1:?output directory}; kb=${2:-.kb}
mkdir -p "$out/files"
python -c "import ml_collections" 2>/dev/null || python -m pip install -q --no-deps .whl/ml_collections-*.whl
for backend in cuda triton; do
  work=${WORKROOT:-/tmp}/coevolve_gpu_$backend
  start=$(date +%s)
  timeout "${LIMIT_S:-240}" python -m experiments.coevolve \
      --config=experiments/configs/coevolve_gpu_random.py --workdir="$work" \
      --config.backend=$backend > "$out/files/stdout_$backend.txt" 2> "$out/files/stderr_$backend.txt"
  echo "$backend: exit $? after $(( $(date +%s) - start )) s"
  cp "$work/phases.json" "$out/files/phases_$backend.json" 2>/dev/null
  cp "$work/metrics.jsonl" "$out/files/metrics_$backend.jsonl" 2>/dev/null
  grep "^round" "$out/files/stdout_$backend.txt"
  grep -v "^I1\|^W1" "$out/files/stderr_$backend.txt" | grep -i "error\|warning" | tail -3 | cut -c1-300
done
[ -n "${SKIP_VALIDATION:-}" ] || timeout "${VALIDATION_LIMIT_S:-200}" python -m benchmarks.module_validation --kernelbench_dir="$kb" \
    --levels=2 --teacher_modules=32 --device=cuda --out="$out/files/module_validation.json" \
    > "$out/files/module_validation.txt" 2>&1
echo "validation: exit $?"
grep -v "^modules:\|it/s\]$" "$out/files/module_validation.txt" | tail -40 | cut -c1-300
tar czf "$out/coevolve_gpu.tgz" -C "$out/files" .
