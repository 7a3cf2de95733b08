"""benchmarks/trial_overhead.py on the CPU: each part lands where it belongs, and the script runs.

A reference whose get_inputs sleeps 30 ms stands in for a slow input set: that time must show in
make_inputs and in every trial with fresh inputs, and only once in a timing that reuses them.
The sleep is long against the parts that must not hold it (a seed takes microseconds), so a busy
machine's stalls (3.4 ms for a median seed on one CI run) cannot cross the bound.
"""

import json
import os
import subprocess
import sys

from benchmarks import trial_overhead

SLOW_INPUTS = """
import time
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    time.sleep(0.03)
    return [torch.rand(8, 16)]

def get_init_inputs():
    return []
"""

SLEEP_MS = 30.0
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_slow_input_set_is_counted_in_fresh_trials_and_once_in_reused_ones():
  row = trial_overhead.measure(SLOW_INPUTS, "cpu", calls=8, profile_top=10)
  assert row["input_bytes"] == 8 * 16 * 4
  assert row["get_inputs_ms"] >= SLEEP_MS and row["make_inputs_ms"] >= SLEEP_MS
  assert row["trial_fresh_ms"] >= SLEEP_MS
  # 11 calls (3 warm-up) share one input set
  assert row["trial_reused_ms"] < SLEEP_MS / 2
  assert row["make_gpu_ms"] is None  # no events on the CPU
  assert row["make_inputs_allseed_ms"] >= SLEEP_MS and row["trial_fresh_allseed_ms"] >= SLEEP_MS
  for key in ("seed_ms", "seed_cpu_ms", "seed_other_ms", "seed_torch_ms", "device_ctx_ms"):
    assert 0.0 <= row[key] < SLEEP_MS, key
  assert any("get_inputs" in line for line in row["profile"]), row["profile"]


def _kernelbench(tmp_path) -> str:
  for level in ("level1", "level2"):
    (tmp_path / level).mkdir()
  (tmp_path / "level1" / "1_Slow_inputs.py").write_text(SLOW_INPUTS)
  return str(tmp_path)


def test_the_script_writes_every_problem_it_names(tmp_path):
  out = tmp_path / "overhead.json"
  subprocess.run([sys.executable, "-m", "benchmarks.trial_overhead",
                  f"--kernelbench_dir={_kernelbench(tmp_path)}", "--problems=level1/1_",
                  "--device=cpu", "--calls=3", f"--out={out}"],
                 check=True, cwd=REPO, timeout=120, capture_output=True)
  results = json.loads(out.read_text())
  assert results["device"] == "cpu" and results["calls"] == 3
  assert list(results["problems"]) == ["level1/1_Slow_inputs"]


def test_a_prefix_that_names_no_problem_is_a_usage_error(tmp_path):
  run = subprocess.run([sys.executable, "-m", "benchmarks.trial_overhead",
                        f"--kernelbench_dir={_kernelbench(tmp_path)}", "--problems=level2/7_",
                        "--device=cpu", "--calls=3"],
                       cwd=REPO, timeout=120, capture_output=True, text=True)
  assert run.returncode != 0
  assert "names 0 problems" in run.stderr
