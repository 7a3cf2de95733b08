r"""A Triton candidate's precompiler with and without Triton's driver utilities planted.

    python -m benchmarks.triton_seed --repeats=5                  # a GPU machine
    python -m benchmarks.triton_seed --repeats=5 --stub_libcuda   # a machine without a GPU

Runs the precompiler (sandbox/triton_precompile.py) of one Triton candidate as a judge starts it
(its own process, the guard, an empty Triton cache), alternately with an empty cache and with the
machine's seed planted in it (sandbox/triton_seed.py), and prints the median seconds of each and
of its steps: the driver's utilities, the kernel, the launchers. On a machine without the CUDA
driver library, `--stub_libcuda` builds a stand-in that exports the functions the utilities call
(as tests/test_triton_seed.py does), so they compile and load as on a GPU machine.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sysconfig
import tempfile

from absl import app
from absl import flags


def build_stub_libcuda(out_dir: str) -> str:
  """A libcuda.so.1 in `out_dir` exporting every cu* function that Triton's driver.c calls
  (each returns an error code); returns `out_dir`."""
  import triton  # pylint: disable=import-outside-toplevel
  driver_dir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia")
  obj = os.path.join(out_dir, "driver.o")
  subprocess.run(["gcc", "-c", "-fPIC", os.path.join(driver_dir, "driver.c"), "-o", obj,
                  "-I" + os.path.join(driver_dir, "include"),
                  "-I" + sysconfig.get_paths()["include"]], check=True, capture_output=True)
  undefined = subprocess.run(["nm", "-u", obj], check=True, capture_output=True,
                             text=True).stdout.split()
  functions = sorted({name for name in undefined if name.startswith("cu")})
  with open(os.path.join(out_dir, "stub.c"), "w", encoding="utf-8") as f:
    f.write("".join(f"int {name}(void) {{ return 999; }}\n" for name in functions))
  subprocess.run(["gcc", "-shared", "-fPIC", os.path.join(out_dir, "stub.c"), "-o",
                  os.path.join(out_dir, "libcuda.so.1")], check=True, capture_output=True)
  return out_dir


def _define_flags() -> None:
  """The command line, defined only when this runs as a program: tests import this module
  beside other benchmarks whose flags have the same names."""
  flags.DEFINE_integer("repeats", 5, "Precompiler runs per setting.")
  flags.DEFINE_bool("stub_libcuda", False, "Build and use a stand-in libcuda.so.1.")
  flags.DEFINE_integer("capability", 90, "Compute capability compiled for.")
  flags.DEFINE_float("run_timeout_s", 240.0, "Limit of one precompiler run.")
  flags.DEFINE_string("out", None, "Write the results here (JSON).")


def main(argv: list[str]) -> None:
  del argv
  if flags.FLAGS.stub_libcuda:
    stub = build_stub_libcuda(tempfile.mkdtemp(prefix="kz_stub_libcuda_"))
    os.environ["TRITON_LIBCUDA_PATH"] = os.environ["LD_LIBRARY_PATH"] = stub
  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import triton_seed
  from kernelzero_jax.sandbox import worker as worker_lib
  from kernelzero_jax.sandbox import worker_handle
  from tests.test_triton_precompile import CANDIDATE, REFERENCE
  root = tempfile.mkdtemp(prefix="kz_seed_bench_")
  manifest = triton_seed.ensure_seed(root)
  print(f"seed built in {manifest.get('seconds')} s: {manifest.get('error') or 'ok'}", flush=True)
  seed = triton_seed.ready_seed(root)
  if seed is None:
    raise SystemExit("no seed on this machine (no CUDA driver library? try --stub_libcuda)")
  runs: dict[str, list[dict]] = {"empty cache": [], "seed planted": []}
  for _ in range(flags.FLAGS.repeats):
    for name in runs:
      workdir = tempfile.mkdtemp(prefix="kz_seed_bench_")
      if name == "seed planted":
        triton_seed.plant(seed, os.path.join(workdir, worker_lib.TRITON_CACHE))
      spec = {"workdir": workdir, "device": "meta", "role": worker_lib.PRECOMPILE,
              "backend": "triton", "candidate_source": CANDIDATE, "reference_source": REFERENCE,
              "memory_limit_gb": 8.0, "gpu_memory_fraction": 0.9,
              "own_kernel_names": ["add_scale_kernel"],
              "triton_capability": flags.FLAGS.capability}
      handle = worker_handle.WorkerHandle(spec, 8.0)
      try:
        runs[name].append(handle.wait(flags.FLAGS.run_timeout_s, "precompile"))
      finally:
        handle.kill()
      # Each run starts a fresh interpreter that imports torch (most of a run's wall time):
      # say so as it goes, so that a run cut by a time limit shows how far it got.
      print(f"{name}: {runs[name][-1].get('seconds')} s", flush=True)
  result = {"seed_seconds": manifest.get("seconds"), "stub_libcuda": flags.FLAGS.stub_libcuda}
  for name, replies in runs.items():
    errors = sorted({r.get("error") for r in replies if r.get("error")})
    medians = {key: round(statistics.median(r[key] for r in replies), 3)
               for key in ("seconds", "utils_s", "kernels_s", "launchers_s")}
    result[name] = {"medians": medians, "errors": errors, "replies": replies}
    print(f"{name:13s} median {medians['seconds']:.3f} s (utilities {medians['utils_s']:.3f}, "
          f"kernels {medians['kernels_s']:.3f}, launchers {medians['launchers_s']:.3f})"
          + (f"; errors: {errors}" if errors else ""))
  ratio = (result["empty cache"]["medians"]["seconds"]
           / result["seed planted"]["medians"]["seconds"])
  result["ratio"] = round(ratio, 2)
  print(f"with the seed planted: x{ratio:.2f} faster")
  if flags.FLAGS.out:
    with open(flags.FLAGS.out, "w", encoding="utf-8") as f:
      json.dump(result, f, indent=1)


if __name__ == "__main__":
  _define_flags()
  app.run(main)
