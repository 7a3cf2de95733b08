"""The teacher: a rule-based Coder for a small family of modules, for the Coder's SFT warm start.

  family.py      the IR (ModuleSpec) and its op vocabulary; the train / held-out split rule
  render.py      ModuleSpec -> KernelBench-format module source
  generator.py   sample_spec / generate_modules: varied op chains and shapes
  parse.py       understand(source) -> ModuleSpec, read from the AST (nothing is executed), or
                 NotInFamily(reason); parse_forward.py and ast_utils.py do the reading
  triton_writer.py, cuda_writer.py
                 ModuleSpec -> ModelNew source, an expression emitter per op
  teach.py       teach(source, backend) = understand + write
  pairs.py       make_pairs / make_teacher_data: sandbox-checked SFT pairs and a report

Nothing here imports torch: the teacher runs in the trainer's process, and only the sandbox runs
the modules and candidates.
"""

from kernelzero_jax.teacher.family import (KINDS, Input, ModuleSpec, Op, Operand, Param,
                                           split_of_structure)
from kernelzero_jax.teacher.generator import generate_modules, sample_spec
from kernelzero_jax.teacher.pairs import make_pairs, make_teacher_data
from kernelzero_jax.teacher.parse import NotInFamily, understand
from kernelzero_jax.teacher.render import render_module
from kernelzero_jax.teacher.teach import teach, write
from kernelzero_jax.teacher.cuda_writer import write_cuda
from kernelzero_jax.teacher.triton_writer import write_triton

__all__ = ["KINDS", "Input", "ModuleSpec", "NotInFamily", "Op", "Operand", "Param",
           "generate_modules", "make_pairs", "make_teacher_data", "render_module", "sample_spec",
           "split_of_structure", "teach", "understand", "write", "write_cuda", "write_triton"]
