"""Tasks: KernelBench loading and the reference-module representation."""

from kernelzero_jax.tasks.kernelbench import default_kernelbench_dir
from kernelzero_jax.tasks.kernelbench import list_tasks
from kernelzero_jax.tasks.kernelbench import load_reference_file
from kernelzero_jax.tasks.kernelbench import load_task
from kernelzero_jax.tasks.kernelbench import Task
from kernelzero_jax.tasks.kernelbench import TaskError
from kernelzero_jax.tasks.kernelbench import validate_reference_source

__all__ = [
    "Task",
    "TaskError",
    "default_kernelbench_dir",
    "list_tasks",
    "load_reference_file",
    "load_task",
    "validate_reference_source",
]
