"""The sandbox CLI's contract: one JSON verdict on the last stdout line, exit 0 with a verdict."""

import json
import os
import subprocess
import sys


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(REPO, "kernelzero_jax", "examples")
REFERENCE = os.path.join(EXAMPLES, "scaled_relu_reference.py")
TRITON = os.path.join(EXAMPLES, "scaled_relu_triton.py")


def _cli(*args, env=None):
  return subprocess.run([sys.executable, "-m", "experiments.evaluate_candidate", *args],
                        cwd=REPO, capture_output=True, text=True, timeout=300,
                        env=dict(os.environ, **(env or {})))


def test_bundled_example_is_correct_and_json_out_matches(tmp_path):
  out = tmp_path / "sub" / "verdict.json"
  proc = _cli(f"--reference={REFERENCE}", f"--candidate={TRITON}", "--backend=triton",
              "--device=cpu", f"--json_out={out}")
  assert proc.returncode == 0, proc.stderr
  last = json.loads(proc.stdout.strip().splitlines()[-1])
  assert last == json.loads(out.read_text())
  for field in ("status", "correct", "speedup", "reference_ms", "candidate_ms", "reasons"):
    assert field in last
  assert last["status"] == "correct" and last["correct"] is True
  assert last["speedup"] is None and last["reference_ms"] is None  # CPU: timings mean nothing
  assert last["tolerance"]["name"] == "kernelzero"
  assert last["num_correct_trials"] == 5


def test_level_and_problem_id_with_cuda_on_cpu_is_unsupported(kernelbench_dir, tmp_path):
  cand = tmp_path / "cand.py"
  cand.write_text(
      "import torch\nfrom torch.utils.cpp_extension import load_inline\n"
      "src = '__global__ void relu_kernel(const float* x, float* y, long n) {}'\n"
      "class ModelNew(torch.nn.Module):\n  def forward(self, x):\n    return x\n")
  proc = _cli("--level=1", "--problem_id=19", f"--candidate={cand}", "--backend=cuda",
              "--device=cpu", env={"KERNELBENCH_DIR": kernelbench_dir})
  assert proc.returncode == 0, proc.stderr
  verdict = json.loads(proc.stdout.strip().splitlines()[-1])
  assert verdict["status"] == "unsupported" and verdict["correct"] is False
  assert "CUDA device" in verdict["reasons"][0]


def test_missing_candidate_is_a_verdict_and_bad_usage_exits_2(tmp_path):
  proc = _cli(f"--reference={REFERENCE}", f"--candidate={tmp_path / 'nope.py'}",
              "--backend=triton", "--device=cpu")
  assert proc.returncode == 0
  verdict = json.loads(proc.stdout.strip().splitlines()[-1])
  assert verdict["status"] == "format_error" and "not found" in verdict["reasons"][0]

  proc = _cli(f"--candidate={TRITON}", "--backend=triton", "--device=cpu")
  assert proc.returncode != 0 and "give either --reference" in proc.stderr
  proc = _cli(f"--reference={tmp_path / 'missing_ref.py'}", f"--candidate={TRITON}",
              "--backend=triton", "--device=cpu")
  assert proc.returncode != 0 and "missing_ref.py" in proc.stderr
  proc = _cli(f"--reference={REFERENCE}", f"--candidate={TRITON}", "--backend=triton",
              "--device=cpu", "--tolerance=loose")
  assert proc.returncode != 0 and "unknown tolerance preset" in proc.stderr
