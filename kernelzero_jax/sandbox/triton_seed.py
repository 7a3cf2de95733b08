"""Triton's driver utilities, compiled once per machine and planted in every candidate's cache.

The first time a process uses Triton's CUDA driver, Triton compiles a C module of driver
utilities (`cuda_utils`, from its own driver.c) with the host compiler into that process's cache.
The sandbox gives every candidate a Triton cache of its own (worker.py), so every Triton candidate
on a GPU compiled the same module again, in its precompiler (triton_precompile.py) or its first
check: about 0.8 s of gcc on one core of this project's CPU machine, out of the 1.75 s a
precompiler took on an H200 (BENCHMARKS.md).

The module is Triton's code, not the candidate's, so a trusted process compiles it once per
machine (`ensure_seed`, started by the pool beside the PCH) into a cache of its own, the seed, and
each judge copies the seed into its candidate's empty cache before the candidate's processes
start (`plant`). Triton looks the module up under a key it computes itself (a hash of the source,
the platform and the compiler's flags), so a worker loads exactly what it would have compiled;
where the key differs, it compiles as before. A file is copied only if its SHA-256 is the one
recorded when the seed was built: a candidate's compiler flags can write outside its directory,
as for the PCH (fast_build.pch_intact). What a candidate changes in its own copy stays in its own
cache, which is deleted with its directory.

    python -m kernelzero_jax.sandbox.triton_seed CACHE_DIR   # builds the seed if missing
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from typing import Any

from kernelzero_jax.sandbox import fast_build

SEED_DIR = "triton_seed"
MANIFEST = "seed.json"
CACHE = "cache"
# The child that compiles: Triton's CUDA driver utilities, in the cache TRITON_CACHE_DIR names.
_COMPILE = ("from triton.backends.nvidia.driver import CudaUtils\n"
            "CudaUtils()\n")


def _digest(data: bytes) -> str:
  return hashlib.sha256(data).hexdigest()


def seed_key() -> str:
  """What the seed depends on: Triton (its version and its driver's source), Python, the host
  compiler Triton would use."""
  import triton  # pylint: disable=import-outside-toplevel
  driver_dir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia")
  parts = [triton.__version__, sys.version, os.environ.get("CC", "")]
  for name in ("driver.c", "driver.py"):
    try:
      with open(os.path.join(driver_dir, name), "rb") as f:
        parts.append(_digest(f.read()))
    except OSError:
      parts.append("")
  return _digest(json.dumps(parts).encode())[:16]


def seed_dir(cache_root: str) -> str:
  return os.path.join(cache_root, SEED_DIR, seed_key())


def build_seed(out_dir: str, key: str, timeout_s: float = 300.0) -> dict[str, Any]:
  """Compiles Triton's driver utilities into `out_dir`/cache in a child process (no GPU needed,
  but the CUDA driver library must be there to link against) and writes the manifest: each
  file's SHA-256, or the error. Returns the manifest."""
  cache = os.path.join(out_dir, CACHE)
  os.makedirs(cache, exist_ok=True)
  env = dict(os.environ, TRITON_CACHE_DIR=cache, CUDA_VISIBLE_DEVICES="")
  env.pop("TRITON_INTERPRET", None)
  t0 = time.perf_counter()
  manifest: dict[str, Any] = {"key": key, "files": {}}
  try:
    out = subprocess.run([sys.executable, "-c", _COMPILE], env=env, capture_output=True,
                         text=True, timeout=timeout_s, check=False, stdin=subprocess.DEVNULL)
    if out.returncode != 0:
      manifest["error"] = (out.stderr.strip().splitlines() or ["exit %d" % out.returncode])[-1]
  except subprocess.TimeoutExpired:
    manifest["error"] = f"compiling took longer than {timeout_s:g} s"
  if "error" not in manifest:
    for root, _, names in os.walk(cache):
      for name in names:
        path = os.path.join(root, name)
        with open(path, "rb") as f:
          manifest["files"][os.path.relpath(path, cache)] = _digest(f.read())
    if not manifest["files"]:
      manifest["error"] = "Triton compiled nothing into the cache"
  manifest["seconds"] = round(time.perf_counter() - t0, 3)
  with open(os.path.join(out_dir, MANIFEST), "w", encoding="utf-8") as f:
    json.dump(manifest, f, indent=1)
  return manifest


def read_manifest(directory: str) -> dict[str, Any] | None:
  try:
    with open(os.path.join(directory, MANIFEST), encoding="utf-8") as f:
      manifest = json.load(f)
  except (OSError, ValueError):
    return None
  return manifest if isinstance(manifest, dict) else None


def ready_seed(cache_root: str) -> str | None:
  """This machine's seed directory if it was built without error, else None (never builds)."""
  directory = seed_dir(cache_root)
  manifest = read_manifest(directory)
  if not manifest or manifest.get("error") or not manifest.get("files"):
    return None
  return directory


def ensure_seed(cache_root: str) -> dict[str, Any]:
  """Builds this machine's seed unless it has one that built (fast_build.build_into_place);
  returns its manifest."""
  final = seed_dir(cache_root)
  fast_build.build_into_place(final, lambda: ready_seed(cache_root) is not None,
                              lambda tmp: build_seed(tmp, os.path.basename(final)))
  return read_manifest(final) or {}


def plant(seed: str, triton_cache: str) -> dict[str, Any]:
  """Copies the seed's files into the (new) Triton cache `triton_cache`, each only if it is the
  file the seed's builder recorded. Returns {"planted": n, "changed": [names not planted]}."""
  manifest = read_manifest(seed) or {}
  planted, changed = 0, []
  for relative, digest in sorted((manifest.get("files") or {}).items()):
    source = os.path.join(seed, CACHE, relative)
    target = os.path.normpath(os.path.join(triton_cache, relative))
    if not target.startswith(os.path.normpath(triton_cache) + os.sep):  # a manifest's "../x"
      changed.append(relative)
      continue
    try:
      with open(source, "rb") as f:
        data = f.read()
    except OSError:
      changed.append(relative)
      continue
    if _digest(data) != digest:
      changed.append(relative)
      continue
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "wb") as f:
      f.write(data)
    if relative.endswith(".so"):
      os.chmod(target, 0o755)
    planted += 1
  return {"planted": planted, "changed": changed}


def main(argv: list[str]) -> int:
  if len(argv) != 2:
    print(__doc__, file=sys.stderr)
    return 2
  manifest = ensure_seed(argv[1])
  print(json.dumps(manifest))
  return 0 if not manifest.get("error") else 1


if __name__ == "__main__":
  sys.exit(main(sys.argv))
