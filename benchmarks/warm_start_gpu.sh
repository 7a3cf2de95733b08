#!/usr/bin/env bash
# The warm start's GPU recipe (experiments/configs/warm_start_gpu.py, or the config file $CONFIG
# names), with its results copied to OUT_DIR (summary.json, warm_start.png, the SFT and RL
# metrics, the held-out, RL-module probe and unseen-module verdicts and reports):
#
#   [CONFIG=experiments/configs/warm_start_gpu_rl.py] bash benchmarks/warm_start_gpu.sh OUT_DIR \
#       [--config.x=y ...]
#
# Installs ml_collections from .whl/ when the machine lacks it (pip download ml_collections
# --no-deps -d .whl). Stops the run at $LIMIT_S seconds (default 540) so that what finished is
# still copied; rerunning with the same workdir resumes. Everything copied is also packed into
# OUT_DIR.tar.gz, one file to fetch from a machine that returns only a few.
set -uo pipefail
out=${1:?output directory}; shift
work=${WORKDIR:-/tmp/warm_start_gpu}
mkdir -p "$out"
python -c "import ml_collections" 2>/dev/null || python -m pip install -q --no-deps .whl/ml_collections-*.whl
start=$(date +%s)
timeout "${LIMIT_S:-540}" python -m experiments.warm_start \
    --config="${CONFIG:-experiments/configs/warm_start_gpu.py}" --workdir="$work" "$@" > "$out/stdout.txt" 2> "$out/stderr.txt"
echo "exit $? after $(( $(date +%s) - start )) s"
cp "$work/summary.json" "$work/warm_start.png" "$out/" 2>/dev/null
for stage in sft rl; do cp "$work/$stage/metrics.jsonl" "$out/${stage}_metrics.jsonl" 2>/dev/null; done
for stage in eval_sft eval_rl probe_sft probe_rl unseen_sft unseen_rl; do
  cp "$work/$stage/verdicts.jsonl" "$out/${stage}_verdicts.jsonl" 2>/dev/null
  cp "$work/$stage/report.md" "$out/${stage}_report.md" 2>/dev/null
done
tar czf "${out%/}.tar.gz" -C "$(dirname "$out")" "$(basename "$out")"
tail -c 3000 "$out/stdout.txt"; grep -v "^I1\|^W1" "$out/stderr.txt" | tail -5 | cut -c1-400
