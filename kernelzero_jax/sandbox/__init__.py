"""The kernel sandbox: static checks, isolated build/correctness/timing, and verdicts.

Importing this package does not import torch: torch runs only in the judge and worker processes.
"""

from kernelzero_jax.sandbox.config import SandboxConfig, TOLERANCE_PRESETS
from kernelzero_jax.sandbox.evaluate import (Job, SandboxPool, cuda_visible, evaluate_candidate,
                                             validate_module)
from kernelzero_jax.sandbox.module_check import ModuleLimits, ModuleVerdict
from kernelzero_jax.sandbox.verdict import STATUSES, Verdict

__all__ = ["SandboxConfig", "TOLERANCE_PRESETS", "Job", "SandboxPool", "cuda_visible",
           "evaluate_candidate", "validate_module", "ModuleLimits", "ModuleVerdict", "STATUSES",
           "Verdict"]
