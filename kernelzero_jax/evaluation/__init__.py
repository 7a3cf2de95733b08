"""KernelBench evaluation: pass@k, fast_p and speedup statistics over evaluated samples; reports.

The metrics and the report are pure Python (matplotlib is imported only to draw the figures), so
importing this package pulls in neither torch nor JAX. The evaluation driver (driver.py) is not
imported here: `from kernelzero_jax.evaluation import driver` when it is needed.
"""

from kernelzero_jax.evaluation.metrics import (ALL, DEFAULT_FAST_THRESHOLDS, DEFAULT_KS,
                                               OTHER_LEVEL, REFERENCE_ERROR, STATUS_ORDER,
                                               ProblemResult, Sample, fast_key, group_by_problem,
                                               mean_pass_at_k, pass_at_k, pass_key, per_problem,
                                               problems_by_level, summarize, summarize_problems)
from kernelzero_jax.evaluation.report import render_markdown, write_report

__all__ = ["ALL", "DEFAULT_FAST_THRESHOLDS", "DEFAULT_KS", "OTHER_LEVEL", "REFERENCE_ERROR",
           "STATUS_ORDER", "ProblemResult", "Sample", "fast_key", "group_by_problem",
           "mean_pass_at_k", "pass_at_k", "pass_key", "per_problem", "problems_by_level",
           "render_markdown", "summarize", "summarize_problems", "write_report"]
