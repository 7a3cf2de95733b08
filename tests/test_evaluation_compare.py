"""evaluation/compare.py and its CLI: problem-by-problem comparison of two evaluations."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from scipy import stats

from kernelzero_jax.evaluation import compare

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("up,down", [(0, 0), (13, 0), (0, 13), (8, 1), (5, 5), (6, 2), (1, 0),
                                     (30, 17)])
def test_sign_test_p_is_scipys_two_sided_binomial_test(up, down):
  expected = 1.0 if up + down == 0 else stats.binomtest(up, up + down, 0.5).pvalue
  assert compare.sign_test_p(up, down) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("correction", [True, False])
@pytest.mark.parametrize("stratum", [(3, 8, 7, 8), (10, 24, 14, 24), (0, 8, 5, 8), (6, 10, 2, 12)])
def test_cmh_on_one_stratum_is_scipys_chi_square_times_n_minus_1_over_n(stratum, correction):
  """On a single 2x2 table the CMH statistic is (n-1)/n times Pearson's chi-square (Yates's with
  the continuity correction)."""
  correct_before, samples_before, correct_after, samples_after = stratum
  table = [[correct_after, samples_after - correct_after],
           [correct_before, samples_before - correct_before]]
  n = samples_before + samples_after
  pearson = stats.chi2_contingency(table, correction=correction).statistic
  expected = stats.chi2.sf(pearson * (n - 1) / n, df=1)
  assert compare.cmh_p([stratum], correction=correction) == pytest.approx(expected, rel=1e-9)


def test_cmh_sums_the_strata_before_dividing():
  """Two strata worked by hand: (1/4 -> 3/4) and (2/4 -> 4/4). Deviations from the expected
  correct-after counts: 3 - 4*4/8 = 1 and 4 - 4*6/8 = 1; variances 4*4*4*4/(64*7) = 4/7 and
  4*4*6*2/(64*7) = 3/7; statistic (2 - 0.5)^2 / 1 = 2.25."""
  assert compare.cmh_p([(1, 4, 3, 4), (2, 4, 4, 4)]) == pytest.approx(stats.chi2.sf(2.25, df=1))
  # Strata that cannot vary (all correct or all wrong) add nothing; none at all gives 1.
  assert compare.cmh_p([(1, 4, 3, 4), (2, 4, 4, 4), (4, 4, 4, 4), (0, 8, 0, 8)]) == (
      compare.cmh_p([(1, 4, 3, 4), (2, 4, 4, 4)]))
  assert compare.cmh_p([(0, 8, 0, 8)]) == 1.0 and compare.cmh_p([]) == 1.0
  # The same rates before and after: no evidence of a change.
  assert compare.cmh_p([(2, 8, 2, 8), (5, 8, 5, 8)]) == 1.0


def test_sign_test_p_rejects_negative_counts():
  with pytest.raises(ValueError):
    compare.sign_test_p(-1, 2)


def _verdicts(counts):
  """{problem: (correct, samples)} -> verdict records (the correct ones first)."""
  return [{"problem": p, "sample": i, "correct": i < c}
          for p, (c, n) in counts.items() for i in range(n)]


BEFORE = {"a_softmax": (1, 4), "b_softmax": (2, 4), "c_matmul": (0, 4), "d_matmul": (3, 4),
          "only_before_matmul": (4, 4)}
AFTER = {"a_softmax": (3, 4), "b_softmax": (1, 4), "c_matmul": (0, 4), "d_matmul": (4, 4),
         "only_after_softmax": (4, 4)}


def test_compare_counts_shared_problems_only_and_groups_them():
  result = compare.compare(_verdicts(BEFORE), _verdicts(AFTER),
                           group_of=lambda p: p.rsplit("_", 1)[-1])
  assert {k: v for k, v in result.items() if k != "by_group"} == {
      "problems": 4, "correct_before": 6, "samples_before": 16, "correct_after": 8,
      "samples_after": 16, "up": 2, "down": 1, "same": 1, "sign_test_p": 1.0,
      "cmh_p": compare.cmh_p([(1, 4, 3, 4), (2, 4, 1, 4), (0, 4, 0, 4), (3, 4, 4, 4)]),
      "only_before": 1, "only_after": 1}
  assert result["by_group"]["softmax"] == {
      "problems": 2, "correct_before": 3, "samples_before": 8, "correct_after": 4,
      "samples_after": 8, "up": 1, "down": 1, "same": 0, "sign_test_p": 1.0,
      "cmh_p": compare.cmh_p([(1, 4, 3, 4), (2, 4, 1, 4)])}
  assert result["by_group"]["matmul"]["up"] == 1 and result["by_group"]["matmul"]["same"] == 1
  assert "by_group" not in compare.compare(_verdicts(BEFORE), _verdicts(AFTER))


def _write(path, records):
  with open(path, "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in records)


def test_read_eval_takes_a_directory_or_a_file_and_names_what_is_missing(tmp_path):
  os.makedirs(tmp_path / "eval")
  _write(tmp_path / "eval" / "verdicts.jsonl", _verdicts(BEFORE))
  assert compare.read_eval(str(tmp_path / "eval")) == _verdicts(BEFORE)
  assert compare.read_eval(str(tmp_path / "eval" / "verdicts.jsonl")) == _verdicts(BEFORE)
  with pytest.raises(FileNotFoundError, match="no verdicts"):
    compare.read_eval(str(tmp_path / "missing"))


def test_cli_prints_the_comparison_and_refuses_a_missing_evaluation(tmp_path):
  _write(tmp_path / "before.jsonl", _verdicts(BEFORE))
  _write(tmp_path / "after.jsonl", _verdicts(AFTER))
  cmd = [sys.executable, "-m", "experiments.compare_evals", f"--before={tmp_path}/before.jsonl",
         f"--after={tmp_path}/after.jsonl", "--by_kind", f"--json_out={tmp_path}/out.json"]
  proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120, check=True)
  lines = proc.stdout.strip().splitlines()
  expected = compare.compare(_verdicts(BEFORE), _verdicts(AFTER),
                             group_of=lambda p: p.rsplit("_", 1)[-1])
  assert json.loads(lines[-1]) == expected
  with open(tmp_path / "out.json") as f:
    assert json.load(f) == expected
  assert lines[0].startswith("all") and "2 up, 1 down, 1 same" in lines[0]
  assert "left out: 1 problems only before, 1 only after" in proc.stdout
  cmd[3] = f"--before={tmp_path}/nothing_here"
  proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
  assert proc.returncode != 0 and "no verdicts" in proc.stderr
