r"""How fast a model built on the CPU reaches the GPU: pageable, pinned by copy, or registered.

    python -m benchmarks.host_upload --sizes_mib=256,4096 --repeats=3 --out=OUT/upload.json

The sandbox builds every model on the CPU, KernelBench's way, and moves it to the GPU: the
reference in the judge (under the candidate's hold where its weights are kept apart) and the
candidate in its worker ("init", under the hold). From pageable memory the driver stages each
copy through its own pinned buffer. This builds an nn.Linear of each size (fp32 weight, its
bias) on the CPU and moves it to the GPU three ways, each on a fresh build and with nothing
page-locked kept from the last (a pinned block that torch's host allocator kept for reuse makes
`pin_memory` a plain memcpy; that is not what a process pinning a new model pays):

- `pageable`: `module.to(device)`, as the sandbox does;
- `pin_memory`: each tensor copied into pinned memory first (`Tensor.pin_memory`, torch's host
  allocator), then moved, then the pinned memory given back (`torch._C._host_emptyCache`); each
  step timed;
- `registered`: the tensors' own pages page-locked in place (`cudaHostRegister`), moved, then
  unlocked (`cudaHostUnregister`); each step timed.

It prints, per size and way, the median seconds of each step and the copy step's GB/s.
"""

from __future__ import annotations

import json
import statistics
import time

from absl import app
from absl import flags

_SIZES = flags.DEFINE_list("sizes_mib", ["256", "4096"], "Weight sizes (MiB, fp32).")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Builds per size and way.")
_OUT = flags.DEFINE_string("out", None, "Write the results here (JSON).")


def _build(torch, mib: int):
  side = int((mib * 1024 * 1024 // 4) ** 0.5)
  torch.manual_seed(0)
  with torch.no_grad():
    model = torch.nn.Linear(side, side)
  return model, sum(p.numel() * p.element_size() for p in model.parameters())


def _timed(torch, fn) -> float:
  torch.cuda.synchronize()
  t0 = time.perf_counter()
  fn()
  torch.cuda.synchronize()
  return time.perf_counter() - t0


def one_upload(torch, mib: int, way: str) -> dict[str, float]:
  """The steps' seconds of one upload of a fresh `mib` MiB model, `way` as in the docstring."""
  model, nbytes = _build(torch, mib)
  steps: dict[str, float] = {}
  if way == "pageable":
    steps["copy_s"] = _timed(torch, lambda: model.to("cuda"))
  elif way == "pin_memory":
    def pin():
      for p in model.parameters():
        p.data = p.data.pin_memory()
    steps["pin_s"] = _timed(torch, pin)
    steps["copy_s"] = _timed(torch, lambda: model.to("cuda"))
    # The page-locked copies, freed by the move, go back from torch's host allocator's cache.
    steps["free_s"] = _timed(torch, torch._C._host_emptyCache)  # pylint: disable=protected-access
  elif way == "registered":
    cudart = torch.cuda.cudart()
    kept = [p.data for p in model.parameters()]  # alive until unregistered

    def register():
      for t in kept:
        code = cudart.cudaHostRegister(t.data_ptr(), t.numel() * t.element_size(), 0)
        if int(code) != 0:
          raise RuntimeError(f"cudaHostRegister failed: {code}")
    steps["pin_s"] = _timed(torch, register)
    steps["copy_s"] = _timed(torch, lambda: model.to("cuda"))

    def unregister():
      for t in kept:
        cudart.cudaHostUnregister(t.data_ptr())
    steps["unpin_s"] = _timed(torch, unregister)
  else:
    raise ValueError(way)
  steps["copy_gb_s"] = nbytes / steps["copy_s"] / 1e9
  del model
  torch.cuda.empty_cache()
  return steps


def main(argv: list[str]) -> None:
  del argv
  import torch  # pylint: disable=import-outside-toplevel
  torch.zeros(1, device="cuda")
  rows = []
  for mib in map(int, _SIZES.value):
    for way in ("pageable", "pin_memory", "registered"):
      runs = [one_upload(torch, mib, way) for _ in range(_REPEATS.value)]
      row = {"mib": mib, "way": way}
      for key in runs[0]:
        row[key] = round(statistics.median(r[key] for r in runs), 4)
      rows.append(row)
      print(json.dumps(row), flush=True)
  if _OUT.value:
    with open(_OUT.value, "w") as f:
      json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                 "rows": rows}, f, indent=1)


if __name__ == "__main__":
  app.run(main)
