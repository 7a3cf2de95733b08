"""experiments.eval_kernelbench end to end on a small KernelBench-like directory of Triton samples
(real sandbox subprocesses, Triton interpreter), resume, and the sample-file layout."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kernelzero_jax import coder
from kernelzero_jax.evaluation import driver
from kernelzero_jax.evaluation import samples as samples_lib
from kernelzero_jax.sandbox import SandboxConfig

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(REPO, "kernelzero_jax", "examples")
ADD_REFERENCE, ADD_TRITON = coder.example_sources("triton")
RELU_REFERENCE = open(os.path.join(EXAMPLES, "scaled_relu_reference.py")).read()
RELU_TRITON = open(os.path.join(EXAMPLES, "scaled_relu_triton.py")).read()
ADD_WRONG = ADD_TRITON.replace("a + b, mask=mask", "a - b, mask=mask")
CPU = SandboxConfig(device="cpu", timing=False, num_correct_trials=2)


@pytest.fixture
def bench(tmp_path):
  """level1: 1_ScaledRelu, 2_Add, 3_Broken (does not load); samples for 2 per problem."""
  level = tmp_path / "kb" / "level1"
  level.mkdir(parents=True)
  (level / "1_ScaledRelu.py").write_text(RELU_REFERENCE)
  (level / "2_Add.py").write_text(ADD_REFERENCE)
  (level / "3_Broken.py").write_text("class Model(:\n")
  samples = tmp_path / "samples"
  samples.mkdir()
  name = samples_lib.sample_file_name
  (samples / name(1, 1, 0, False)).write_text(RELU_TRITON)
  # A raw chat completion: the code block is extracted.
  (samples / name(1, 1, 1, True)).write_text(
      f"Sure.\n```python\n{RELU_TRITON}```<|im_end|>")
  (samples / name(1, 2, 0, False)).write_text(ADD_TRITON)
  (samples / name(1, 2, 1, False)).write_text(ADD_WRONG)
  (samples / "notes.txt").write_text("not a sample")
  return tmp_path


def _config(bench, **kw):
  return driver.EvalConfig(workdir=str(bench / "work"), kernelbench_dir=str(bench / "kb"),
                           levels=(1,), backend="triton", num_samples=2,
                           samples_dir=str(bench / "samples"), sandbox=CPU, max_parallel=2,
                           progress=False, **kw)


def test_scan_samples_layout(bench):
  found, odd = samples_lib.scan_samples(str(bench / "samples"))
  assert sorted(found) == [(1, 1, 0), (1, 1, 1), (1, 2, 0), (1, 2, 1)]
  assert found[(1, 1, 1)].is_completion and not found[(1, 1, 0)].is_completion
  assert [os.path.basename(p) for p in odd] == ["notes.txt"]


def test_eval_records_metrics_report_and_resume(bench, monkeypatch):
  summary = driver.run_eval(_config(bench))
  work = bench / "work"
  records = driver.read_verdicts(str(work))
  statuses = {(r["problem"], r["sample"]): r["status"] for r in records}
  assert statuses == {("level1/1_ScaledRelu", 0): "correct", ("level1/1_ScaledRelu", 1): "correct",
                      ("level1/2_Add", 0): "correct", ("level1/2_Add", 1): "incorrect"}
  # ScaledRelu's two samples hold the same code: judged once, the copy says of which sample.
  copies = {(r["problem"], r["sample"]): r["copy_of_sample"] for r in records
            if "copy_of_sample" in r}
  assert copies == {("level1/1_ScaledRelu", 1): 0}
  overall = summary["levels"]["all"]
  assert overall["num_problems"] == 2 and overall["num_samples"] == 4
  assert overall["pass_at_k"]["pass@1"] == pytest.approx(0.75)
  assert any("3_Broken" in p for p in summary["skipped_problems"])
  for name in ("report.md", "speedup_hist.png", "pass_at_k.png", "per_problem.jsonl",
               "summary.json"):
    assert os.path.exists(work / name), name
  assert "75.0%" in (work / "report.md").read_text()

  # A rerun judges nothing again.
  def no_jobs(self, jobs, **kw):
    assert not list(jobs), "a finished verdict was judged again"
    return []
  monkeypatch.setattr(driver.SandboxPool, "evaluate", no_jobs)
  again = driver.run_eval(_config(bench))
  assert again["levels"]["all"] == overall
  assert len(driver.read_verdicts(str(work))) == 4


def test_interrupted_run_keeps_finished_verdicts(bench):
  """A run killed mid-write left one finished verdict and a torn line: only the rest is judged,
  and a missing sample counts as a format_error, not as absent."""
  work = bench / "work"
  work.mkdir()
  done = {"level": 1, "problem": "level1/2_Add", "problem_id": 2, "sample": 1,
          "status": "incorrect", "correct": False, "speedup": None, "speedup_vs_compile": None,
          "degenerate": [], "reference_error": False, "tolerance": {}, "reasons": ["kept"]}
  (work / driver.VERDICTS_FILE).write_text(json.dumps(done) + "\n" + '{"level": 1, "probl')
  os.remove(bench / "samples" / samples_lib.sample_file_name(1, 1, 1, True))
  summary = driver.run_eval(_config(bench))
  records = {(r["problem"], r["sample"]): r for r in driver.read_verdicts(str(work))}
  assert records[("level1/2_Add", 1)]["reasons"] == ["kept"]  # not judged again
  missing = records[("level1/1_ScaledRelu", 1)]
  assert missing["status"] == "format_error" and "no sample file" in missing["reasons"][0]
  assert summary["levels"]["all"]["num_samples"] == 4


def test_config_needs_exactly_one_source(bench):
  with pytest.raises(ValueError, match="exactly one candidate source"):
    driver.EvalConfig(workdir="w", samples_dir="s", model_dir="m")
  with pytest.raises(ValueError, match="exactly one candidate source"):
    driver.EvalConfig(workdir="w")


def _tiny_policy_checkpoint(workdir) -> str:
  # pylint: disable=import-outside-toplevel
  from flax import nnx
  from kernelzero_jax.model.config import PRESETS
  from kernelzero_jax.model.qwen2 import Qwen2
  from kernelzero_jax.rl import train_step as ts
  from kernelzero_jax.rl.checkpointing import Checkpointer
  optimizer = ts.make_optimizer(ts.OptimizerConfig())
  _, state = ts.init_train_state(Qwen2(PRESETS["tiny"], rngs=nnx.Rngs(7)), optimizer)
  with Checkpointer(str(workdir)) as ckpt:
    ckpt.save(3, state, {"step": 3})
  return str(workdir)


def test_command_end_to_end_from_a_policy_checkpoint(bench):
  """The CLI samples from our checkpoint (the tiny random policy: its completions hold no code,
  so every sample is a format_error), writes the completions and the report, and prints JSON."""
  work = bench / "policy_eval"
  base = [sys.executable, "-m", "experiments.eval_kernelbench",
          f"--kernelbench_dir={bench / 'kb'}", "--levels=1",
          "--backend=triton", "--device=cpu", "--num_samples=2", "--temperature=1.0",
          "--problem_ids=1/2",
          "--max_new_tokens=8", "--prompt_style=zero_shot", f"--workdir={work}"]
  proc = subprocess.run(base + [f"--policy_checkpoint={bench / 'no_ckpt'}"], cwd=REPO,
                        capture_output=True, text=True, timeout=300)
  assert proc.returncode != 0 and "no checkpoints" in proc.stderr  # named, not a traceback soup
  ckpt = _tiny_policy_checkpoint(bench / "ckpt")
  proc = subprocess.run(base + [f"--policy_checkpoint={ckpt}"], cwd=REPO, capture_output=True,
                        text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  last = json.loads(proc.stdout.strip().splitlines()[-1])
  assert last["num_samples"] == 2 and last["status"]["counts"]["format_error"] == 2
  found, _ = samples_lib.scan_samples(str(work / "samples"))
  assert sorted(found) == [(1, 2, 0), (1, 2, 1)] and found[(1, 2, 0)].is_completion
  assert os.path.exists(work / "report.md")


def test_teacher_as_a_baseline_coder(bench):
  """The teacher solves both family members of the small benchmark; a module outside its family
  would be a format_error carrying the teacher's reason."""
  level = bench / "kb" / "level1"
  (level / "4_Conv.py").write_text(
      "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
      "    def __init__(self):\n        super().__init__()\n"
      "        self.conv = nn.Conv2d(3, 4, 3)\n\n    def forward(self, x):\n"
      "        return self.conv(x)\n\n\ndef get_inputs():\n"
      "    return [torch.randn(1, 3, 8, 8)]\n\n\ndef get_init_inputs():\n    return []\n")
  config = driver.EvalConfig(workdir=str(bench / "teacher"), kernelbench_dir=str(bench / "kb"),
                             levels=(1,), backend="triton", num_samples=1, teacher=True,
                             sandbox=CPU, max_parallel=2, progress=False)
  driver.run_eval(config)
  statuses = {r["problem"]: r for r in driver.read_verdicts(str(bench / "teacher"))}
  assert statuses["level1/1_ScaledRelu"]["status"] == "correct"
  assert statuses["level1/2_Add"]["status"] == "correct"
  conv = statuses["level1/4_Conv"]
  assert conv["status"] == "format_error"
  assert conv["reasons"][0].startswith("the teacher does not understand this module")
