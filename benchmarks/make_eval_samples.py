r"""A samples directory of honest and broken kernels, for running eval_kernelbench on a GPU.

    python -m benchmarks.make_eval_samples --backend=triton --out=/tmp/eval_samples

For every honest candidate in benchmarks/candidates/honest/ (level{L}_{id}_{backend}.py) it
writes, in KernelBench's run layout (kernelzero_jax/evaluation/samples.py):
  sample 0: the honest kernel;
  sample 1: a broken submission: a cheat from benchmarks/candidates/cheats/ written for that
            problem and backend (its `# problem:` / `# backend:` header) if there is one, else
            the honest kernel of ANOTHER problem (wrong semantics or shapes).
Prints the problem ids as a --problem_ids value for eval_kernelbench.
"""

from __future__ import annotations

import os
import re

from absl import app
from absl import flags

from kernelzero_jax.evaluation.samples import sample_file_name

_BACKEND = flags.DEFINE_enum("backend", "triton", ["cuda", "triton"], "Kernel language.")
_CANDIDATES = flags.DEFINE_string("candidates_dir", "benchmarks/candidates", "Candidates root.")
_OUT = flags.DEFINE_string("out", None, "Samples directory to write.")
flags.mark_flag_as_required("out")

_HONEST_RE = re.compile(r"^level(\d)_(\d+)_(cuda|triton)\.py$")
_HEADER_RE = re.compile(r"^# (problem|backend): (\S+)", re.MULTILINE)


def main(argv):
  del argv
  backend = _BACKEND.value
  honest_dir = os.path.join(_CANDIDATES.value, "honest")
  honest = {}
  for name in sorted(os.listdir(honest_dir)):
    m = _HONEST_RE.match(name)
    if m and m.group(3) == backend:
      honest[(int(m.group(1)), int(m.group(2)))] = open(os.path.join(honest_dir, name)).read()
  cheats = {}
  cheats_dir = os.path.join(_CANDIDATES.value, "cheats")
  for name in sorted(os.listdir(cheats_dir)):
    source = open(os.path.join(cheats_dir, name)).read()
    header = dict(_HEADER_RE.findall(source))
    m = re.match(r"level(\d+)/(\d+)_", header.get("problem", ""))
    if m and header.get("backend") == backend:
      cheats.setdefault((int(m.group(1)), int(m.group(2))), source)
  os.makedirs(_OUT.value, exist_ok=True)
  keys = sorted(honest)
  for i, (level, pid) in enumerate(keys):
    broken = cheats.get((level, pid), honest[keys[(i + 1) % len(keys)]])
    for sample, source in ((0, honest[(level, pid)]), (1, broken)):
      with open(os.path.join(_OUT.value, sample_file_name(level, pid, sample, False)), "w") as f:
        f.write(source)
  print(",".join(f"{level}/{pid}" for level, pid in keys))


if __name__ == "__main__":
  app.run(main)
