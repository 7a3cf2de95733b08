"""pass@k, fast_p and the rest of metrics.summarize on hand-made records, and the written report."""

import json
import math
import os

import pytest

from kernelzero_jax.evaluation import metrics, report

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _exact_pass_at_k(n, c, k):
  return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _rec(problem, sample, status="correct", speedup=None, level="from_name", **extra):
  if level == "from_name":
    level = int(problem.split("/")[0][5:]) if problem.startswith("level") else None
  return {"level": level, "problem": problem, "sample": sample, "status": status,
          "correct": status == "correct", "speedup": speedup,
          "speedup_vs_compile": extra.pop("speedup_vs_compile", None),
          "degenerate": extra.pop("degenerate", []),
          "reference_error": extra.pop("reference_error", False),
          "tolerance": extra.pop("tolerance", {"name": "kernelzero", "float32": [0.01, 0.01]}),
          **extra}


# ---- pass@k

@pytest.mark.parametrize("n", [1, 2, 3, 5, 10, 16, 50, 100])
def test_pass_at_k_matches_exact_formula(n):
  for c in range(n + 1):
    for k in range(1, n + 1):
      assert metrics.pass_at_k(n, c, k) == pytest.approx(_exact_pass_at_k(n, c, k), abs=1e-12)


def test_pass_at_k_edge_values():
  assert metrics.pass_at_k(10, 0, 5) == 0.0
  assert metrics.pass_at_k(10, 10, 5) == 1.0
  assert metrics.pass_at_k(5, 1, 5) == 1.0  # n == k: any correct sample is drawn
  assert metrics.pass_at_k(5, 0, 5) == 0.0
  assert metrics.pass_at_k(4, 1, 1) == 0.25  # pass@1 is c / n
  assert metrics.pass_at_k(10, 3, 1) == pytest.approx(0.3)


def test_pass_at_k_is_stable_for_large_n():
  # The binomials here have hundreds of digits; the product form stays a plain float.
  got = metrics.pass_at_k(2000, 7, 100)
  assert got == pytest.approx(_exact_pass_at_k(2000, 7, 100), rel=1e-9)
  assert 0.0 < got < 1.0


@pytest.mark.parametrize("n, c, k", [(5, 0, 6), (5, 6, 1), (5, -1, 1), (0, 0, 1), (5, 2, 0),
                                     (5.0, 2, 1), (5, 2, 1.0), (True, 1, 1)])
def test_pass_at_k_rejects_bad_inputs(n, c, k):
  with pytest.raises(ValueError):
    metrics.pass_at_k(n, c, k)


# ---- summarize

def _two_level_records():
  """level1: A (5 samples, 2 correct), B (5 samples, 0 correct); level2: C (6 samples, 6 correct).

  Speedups of the correct samples: A 1.0 and 2.0, C 1.2, 1.2, 1.5, 4.0, None, None (two untimed).
  """
  recs = [_rec("level1/1_A", 0, speedup=1.0), _rec("level1/1_A", 1, speedup=2.0),
          _rec("level1/1_A", 2, "incorrect"), _rec("level1/1_A", 3, "compile_error"),
          _rec("level1/1_A", 4, "runtime_error")]
  recs += [_rec("level1/2_B", i, s) for i, s in
           enumerate(["incorrect", "rejected", "timeout", "format_error", "unsupported"])]
  recs += [_rec("level2/3_C", i, speedup=s) for i, s in
           enumerate([1.2, 1.2, 1.5, 4.0, None, None])]
  return recs


def test_summarize_per_level_and_all():
  s = metrics.summarize(_two_level_records())
  assert s["level_order"] == ["level1", "level2", "all"]
  assert s["ks"] == [1, 5, 10] and s["fast_thresholds"] == [1.0, 1.2]
  l1, l2, everything = s["levels"]["level1"], s["levels"]["level2"], s["levels"]["all"]

  assert (l1["num_problems"], l1["num_samples"], l1["num_correct"]) == (2, 10, 2)
  assert l1["samples_per_problem"] == {"min": 5, "max": 5}
  assert l1["pass_at_k"]["pass@1"] == pytest.approx((2 / 5 + 0) / 2)
  assert l1["pass_at_k"]["pass@5"] == pytest.approx((1.0 + 0.0) / 2)
  assert l1["pass_at_k"]["pass@10"] is None and l1["pass_at_k_skipped"] == [10]
  # fast_1: speedup 1.0 is not > 1, so only A's 2.0 counts; fast_1.2 the same.
  assert l1["fast_p"] == {"fast_1": pytest.approx((1 / 5 + 0) / 2),
                          "fast_1.2": pytest.approx((1 / 5 + 0) / 2)}
  assert l1["geomean_speedup"] == {"value": pytest.approx(math.sqrt(2.0)), "count": 2}
  assert l1["num_correct_untimed"] == 0

  assert l2["pass_at_k"] == {"pass@1": 1.0, "pass@5": 1.0, "pass@10": None}
  # 1.2 is exactly at the fast_1.2 threshold and does not count; None speedups never count.
  assert l2["fast_p"] == {"fast_1": pytest.approx(4 / 6), "fast_1.2": pytest.approx(2 / 6)}
  assert l2["geomean_speedup"]["value"] == pytest.approx((1.2 * 1.2 * 1.5 * 4.0) ** 0.25)
  assert (l2["num_correct_timed"], l2["num_correct_untimed"]) == (4, 2)

  assert (everything["num_problems"], everything["num_samples"]) == (3, 16)
  assert everything["samples_per_problem"] == {"min": 5, "max": 6}
  assert everything["pass_at_k"]["pass@1"] == pytest.approx((0.4 + 0.0 + 1.0) / 3)
  assert everything["pass_at_k"]["pass@5"] == pytest.approx((1.0 + 0.0 + 1.0) / 3)
  assert everything["fast_p"]["fast_1"] == pytest.approx((1 / 5 + 0 + 4 / 6) / 3)
  assert everything["fast_p"]["fast_1.2"] == pytest.approx((1 / 5 + 0 + 2 / 6) / 3)
  assert everything["geomean_speedup"] == {
      "value": pytest.approx((1.0 * 2.0 * 1.2 * 1.2 * 1.5 * 4.0) ** (1 / 6)), "count": 6}
  assert everything["num_correct_untimed"] == 2

  status = everything["status"]
  assert status["counts"] == {"compile_error": 1, "runtime_error": 1, "incorrect": 2,
                              "rejected": 1, "timeout": 1, "format_error": 1, "unsupported": 1,
                              "correct": 8}
  assert status["fractions"]["correct"] == pytest.approx(8 / 16)
  assert status["fractions"]["incorrect"] == pytest.approx(2 / 16)
  assert math.fsum(status["fractions"].values()) == pytest.approx(1.0)
  assert everything["tolerance_presets"] == ["kernelzero"]
  assert s["has_speedup_vs_compile"] is False and everything["fast_p_vs_compile"] is None
  assert s["excluding_degenerate"]["num_excluded"] == 0
  assert s["excluding_degenerate"]["levels"] == s["levels"]


def test_pass_at_1_weighs_problems_equally():
  # 1 of 1 correct and 0 of 3 correct: pass@1 is mean(1, 0) = 0.5, not 1 / 4 of all samples.
  recs = [_rec("level1/1_A", 0)] + [_rec("level1/2_B", i, "incorrect") for i in range(3)]
  s = metrics.summarize(recs)
  assert s["levels"]["all"]["pass_at_k"]["pass@1"] == 0.5
  assert s["levels"]["all"]["status"]["fractions"]["correct"] == 0.25
  assert s["levels"]["all"]["pass_at_k_skipped"] == [5, 10]


def test_speedup_vs_compile_and_custom_thresholds():
  recs = [_rec("level1/1_A", 0, speedup=2.0, speedup_vs_compile=0.9),
          _rec("level1/1_A", 1, speedup=1.5, speedup_vs_compile=1.6),
          _rec("level1/1_A", 2, "incorrect", speedup_vs_compile=None)]
  s = metrics.summarize(recs, ks=(1, 2), fast_thresholds=(0.5, 1.5))
  g = s["levels"]["all"]
  assert s["has_speedup_vs_compile"] is True
  assert g["fast_p"] == {"fast_0.5": pytest.approx(2 / 3), "fast_1.5": pytest.approx(1 / 3)}
  assert g["fast_p_vs_compile"] == {"fast_0.5": pytest.approx(2 / 3),
                                    "fast_1.5": pytest.approx(1 / 3)}
  assert g["geomean_speedup_vs_compile"]["value"] == pytest.approx(math.sqrt(0.9 * 1.6))
  assert g["pass_at_k"]["pass@2"] == pytest.approx(_exact_pass_at_k(3, 2, 2))


def test_degenerate_problems_are_excluded_and_counted():
  recs = _two_level_records()
  recs += [_rec("level1/4_D", 0, degenerate=["constant_output_passes"]), _rec("level1/4_D", 1),
           _rec("level2/5_E", 0, "runtime_error", reference_error=True, tolerance={}),
           _rec("level2/5_E", 1, "runtime_error", tolerance={}),
           _rec("level2/6_F", 0, degenerate=["reference_not_reproducible",
                                             "constant_output_passes"])]
  s = metrics.summarize(recs)
  excluded = s["excluding_degenerate"]
  assert excluded["excluded_problems"] == ["level1/4_D", "level2/5_E", "level2/6_F"]
  assert excluded["degenerate_kinds"] == {"constant_output_passes": 2, "reference_error": 1,
                                          "reference_not_reproducible": 1}
  # Without them, the numbers are those of the two-level set alone.
  clean = metrics.summarize(_two_level_records())
  assert excluded["levels"] == clean["levels"]
  assert s["levels"]["all"]["num_problems"] == 6
  assert s["levels"]["all"]["samples_per_problem"]["min"] == 1
  assert s["levels"]["all"]["pass_at_k"]["pass@5"] is None


def test_level_with_only_degenerate_problems_stays_as_empty_row():
  recs = [_rec("level1/1_A", 0), _rec("level2/1_B", 0, reference_error=True)]
  s = metrics.summarize(recs)
  empty = s["excluding_degenerate"]["levels"]["level2"]
  assert empty["num_problems"] == 0 and empty["pass_at_k"]["pass@1"] is None
  assert empty["fast_p"]["fast_1"] is None and empty["geomean_speedup"]["value"] is None
  assert empty["status"]["fractions"]["correct"] is None


def test_summarize_is_deterministic_and_json_clean():
  recs = _two_level_records()
  a = json.dumps(metrics.summarize(recs), sort_keys=True, allow_nan=False)
  b = json.dumps(metrics.summarize(list(reversed(recs))), sort_keys=True, allow_nan=False)
  assert a == b


def test_level_from_problem_name_and_other():
  recs = [_rec("level3/1_A", 0, level=None), _rec("my_module", 0), _rec("level10/2_B", 0),
          _rec("level2/1_C", 0)]
  s = metrics.summarize(recs)
  assert s["level_order"] == ["level2", "level3", "level10", "other", "all"]


def test_empty_records():
  s = metrics.summarize([])
  assert s["level_order"] == ["all"]
  g = s["levels"]["all"]
  assert g["num_problems"] == 0 and g["pass_at_k"]["pass@1"] is None
  assert g["pass_at_k_skipped"] == []
  json.dumps(s, allow_nan=False)


@pytest.mark.parametrize("bad", [
    {"status": "bogus"},
    {"status": "incorrect", "correct": True},
    {"speedup": float("nan")},
    {"speedup": 0.0},
    {"speedup": float("inf")},
    {"level": "1"},
])
def test_bad_records_are_refused(bad):
  rec = _rec("level1/1_A", 0)
  rec.update(bad)
  with pytest.raises(ValueError):
    metrics.summarize([rec])


def test_repeated_sample_and_bad_options_are_refused():
  with pytest.raises(ValueError, match="repeated"):
    metrics.summarize([_rec("level1/1_A", 0), _rec("level1/1_A", 0)])
  with pytest.raises(ValueError):
    metrics.summarize([_rec("level1/1_A", 0)], ks=(0,))
  with pytest.raises(ValueError):
    metrics.summarize([_rec("level1/1_A", 0)], fast_thresholds=(float("nan"),))


def test_per_problem_rows():
  rows = metrics.per_problem(_two_level_records())
  assert [r["problem"] for r in rows] == ["level1/1_A", "level1/2_B", "level2/3_C"]
  a = rows[0]
  assert (a["n"], a["c"], a["pass@1"], a["best_speedup"]) == (5, 2, 0.4, 2.0)
  assert a["statuses"] == {"compile_error": 1, "runtime_error": 1, "incorrect": 1, "correct": 2}
  assert rows[1]["best_speedup"] is None


def test_problems_sort_naturally():
  recs = [_rec("level1/10_X", 0), _rec("level1/2_Y", 0), _rec("level1/1_Z", 0)]
  assert [r["problem"] for r in metrics.per_problem(recs)] == [
      "level1/1_Z", "level1/2_Y", "level1/10_X"]


# ---- the report

def _report(tmp_path, recs, **kwargs):
  summary = metrics.summarize(recs, **kwargs)
  paths = report.write_report(recs, summary, str(tmp_path), title="Synthetic")
  for key in ("speedup_hist", "pass_at_k"):
    with open(paths[key], "rb") as f:
      assert f.read(8) == PNG_SIGNATURE, key
  with open(paths["report"], encoding="utf-8") as f:
    text = f.read()
  return paths, text


def _row(text, label, heading="## Results"):
  section = text.split(heading, 1)[1]
  return next(line for line in section.splitlines() if line.startswith(f"| {label} |"))


def test_write_report_files_and_numbers(tmp_path):
  recs = _two_level_records() + [_rec("level1/4_D", 0, degenerate=["constant_output_passes"]),
                                 _rec("level1/4_D", 1), _rec("level1/4_D", 2),
                                 _rec("level1/4_D", 3), _rec("level1/4_D", 4)]
  paths, text = _report(tmp_path, recs)
  assert sorted(os.path.basename(p) for p in paths.values()) == [
      "pass_at_k.png", "per_problem.jsonl", "report.md", "speedup_hist.png"]
  header = next(line for line in text.splitlines() if line.startswith("|  | Problems"))
  assert header == "|  | Problems | pass@1 | pass@5 | fast_1 | fast_1.2 | Geomean speedup |"
  # level1 with D: pass@1 = (0.4 + 0 + 1) / 3 = 46.7%, pass@5 = (1 + 0 + 1) / 3 = 66.7%,
  # fast_1 = fast_1.2 = (0.2 + 0 + 0) / 3 = 6.7%, geomean sqrt(2) over 2 timed samples.
  assert _row(text, "Level 1") == "| Level 1 | 3 | 46.7% | 66.7% | 6.7% | 6.7% | 1.41× (n=2) |"
  assert _row(text, "Level 2") == "| Level 2 | 1 | 100.0% | 100.0% | 66.7% | 33.3% | 1.71× (n=4) |"
  assert _row(text, "Level 1", "## Excluding degenerate") == (
      "| Level 1 | 2 | 20.0% | 50.0% | 10.0% | 10.0% | 1.41× (n=2) |")
  assert "Excluded 1 of 4 problems (problems per kind: constant_output_passes: 1):" in text
  assert "`level1/4_D`" in text
  assert "- pass@10 not computed for Level 1, Level 2, All" in text
  assert "7 of 13 correct samples had no timing" in text
  assert "| All | 21 | 1 (4.8%) | 1 (4.8%) | 2 (9.5%) |" in text
  assert "- `kernelzero`: float32 atol=0.01, rtol=0.01" in text
  with open(paths["per_problem"]) as f:
    rows = [json.loads(line) for line in f]
  assert [r["problem"] for r in rows] == ["level1/1_A", "level1/2_B", "level1/4_D", "level2/3_C"]
  assert rows[2]["degenerate"] == ["constant_output_passes"]


def test_report_lists_problems_that_did_not_load(tmp_path):
  recs = [_rec("level1/1_A", 0)]
  summary = metrics.summarize(recs)
  summary["skipped_problems"] = ["level1/9_Bad.py: no class Model"]  # as the driver adds them
  text = report.render_markdown(summary, "t")
  assert ("1 problem file(s) did not load and are not counted:\n\n"
          "- level1/9_Bad.py: no class Model") in text


def test_report_with_compile_speedups(tmp_path):
  recs = [_rec("level1/1_A", 0, speedup=2.0, speedup_vs_compile=1.1)]
  _, text = _report(tmp_path, recs)
  assert "## Against torch.compile" in text
  assert _row(text, "All", "## Against torch.compile") == (
      "| All | 100.0% | 0.0% | 1.10× (n=1) |")


@pytest.mark.parametrize("case", ["no_correct", "cpu_no_speedups", "single_sample", "empty"])
def test_report_edge_cases(tmp_path, case):
  if case == "no_correct":
    recs = [_rec("level1/1_A", i, "incorrect") for i in range(5)]
  elif case == "cpu_no_speedups":
    recs = [_rec(f"level2/{p}_P", i) for p in range(3) for i in range(2)]
  elif case == "single_sample":
    recs = [_rec("level1/1_A", 0, speedup=1.5), _rec("level1/2_B", 0, "incorrect")]
  else:
    recs = []
  paths, text = _report(tmp_path, recs)
  assert "nan" not in text.lower()
  if case == "no_correct":
    assert "No correct samples" in text
    assert _row(text, "Level 1") == "| Level 1 | 1 | 0.0% | 0.0% | 0.0% | 0.0% | — |"
  elif case == "cpu_no_speedups":
    assert "6 of 6 correct samples had no timing" in text
    assert _row(text, "All") == "| All | 3 | 100.0% | 0.0% | 0.0% | — |"
    assert "pass@5 not computed" in text
  elif case == "single_sample":
    assert "|  | Problems | pass@1 | fast_1 | fast_1.2 | Geomean speedup |" in text
    assert _row(text, "All") == "| All | 2 | 50.0% | 50.0% | 50.0% | 1.50× (n=1) |"
  else:
    assert _row(text, "All") == "| All | 0 | — | — | — | — |"
    assert os.path.getsize(paths["per_problem"]) == 0
