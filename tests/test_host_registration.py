"""host_registration: which pages a model's move registers, once each, for how long, and what a
failed call leaves. cudaHostRegister needs a GPU, so a recording stand-in takes torch's
`torch.cuda.cudart()` place here (benchmarks/host_upload.py measures the real one)."""

import gc
import weakref

import pytest
import torch

from kernelzero_jax.sandbox import host_registration

PAGE = 4096


def test_spans_become_whole_pages_each_in_one_range():
  assert host_registration.page_ranges([(PAGE + 10, 100)], PAGE) == [(PAGE, PAGE)]
  # two spans in one page, a span across a page boundary, and one that only touches the last
  assert host_registration.page_ranges(
      [(3 * PAGE + 5, 10), (3 * PAGE + 100, 10), (10 * PAGE - 1, 2), (12 * PAGE, PAGE),
       (11 * PAGE, PAGE), (20 * PAGE, 0)], PAGE) == [(3 * PAGE, PAGE), (9 * PAGE, 4 * PAGE)]
  assert host_registration.page_ranges([], PAGE) == []


class FakeCudart:
  """Records calls; fails the `fail_register`-th registration (1-based) with error 712."""

  def __init__(self, fail_register=None, fail_unregister=False):
    self.calls, self.fail_register, self.fail_unregister = [], fail_register, fail_unregister
    self.registered = set()

  def cudaHostRegister(self, start, size, flags):  # pylint: disable=invalid-name
    self.calls.append(("register", start, size, flags))
    if sum(c[0] == "register" for c in self.calls) == self.fail_register:
      return 712  # cudaErrorHostMemoryAlreadyRegistered
    assert start % PAGE == 0 and size % PAGE == 0 and start not in self.registered
    self.registered.add(start)
    return 0

  def cudaHostUnregister(self, start):  # pylint: disable=invalid-name
    self.calls.append(("unregister", start))
    self.registered.discard(start)
    return 1 if self.fail_unregister else 0


class Model(torch.nn.Module):
  def __init__(self):
    super().__init__()
    self.big = torch.nn.Linear(256, 256)  # 256 KiB, its own pages
    self.tied = torch.nn.Linear(8, 8)
    self.other = torch.nn.Linear(8, 8)
    self.other.weight = self.tied.weight
    self.register_buffer("scale", torch.ones(4))


def _move(model, cudart, cleared, min_bytes=0):
  """What the sandbox's move does, on the CPU: the module's tensors replaced by copies, the old
  ones dropped by the module (as Module.to a GPU would). Returns the evidence and the pages
  registered while the block ran."""
  with host_registration.registered(model, cudart, lambda: cleared.append(1), min_bytes) as ev:
    model._apply(lambda t: t.clone())  # pylint: disable=protected-access
    gc.collect()
    during = set(cudart.registered)
  return ev, during


def test_each_page_is_registered_once_and_unregistered_after_the_move(monkeypatch):
  monkeypatch.setattr(host_registration, "PAGE_BYTES", PAGE)
  model, cudart, cleared = Model(), FakeCudart(), []
  spans = [(s.data_ptr(), s.nbytes()) for s in host_registration.cpu_storages(model)]
  ranges = host_registration.page_ranges(spans)
  evidence, during = _move(model, cudart, cleared)
  assert [c[1:3] for c in cudart.calls if c[0] == "register"] == ranges
  assert during == {start for start, _ in ranges}
  assert cudart.registered == set() and cleared == []
  assert [c[1] for c in cudart.calls if c[0] == "unregister"] == [start for start, _ in ranges]
  assert evidence["bytes"] == sum(size for _, size in spans)
  assert evidence["ranges"] == len(ranges) and {"register_s", "unregister_s"} <= set(evidence)


def test_a_failed_registration_is_cleared_and_the_registered_pages_released():
  model, cudart, cleared = Model(), FakeCudart(fail_register=2), []
  evidence, _ = _move(model, cudart, cleared)
  assert cleared == [1] and evidence["register_failed"] == "cudaHostRegister: CUDA error 712"
  registered = [c for c in cudart.calls if c[0] == "register"]
  unregistered = [c for c in cudart.calls if c[0] == "unregister"]
  assert len(registered) == 2 and unregistered == [("unregister", registered[0][1])]
  assert cudart.registered == set()


def test_a_failed_unregistration_is_cleared_and_told():
  model, cudart, cleared = Model(), FakeCudart(fail_unregister=True), []
  evidence, _ = _move(model, cudart, cleared)
  assert evidence["unregister_failed"] == "cudaHostUnregister: CUDA error 1"
  assert cleared == [1] * evidence["ranges"]


def test_a_call_that_raises_counts_as_failed_and_a_module_that_hides_its_tensors_moves_plainly():
  class Raising(FakeCudart):
    def cudaHostRegister(self, start, size, flags):  # pylint: disable=invalid-name
      raise TypeError("bad pointer")
  cleared = []
  evidence, _ = _move(Model(), Raising(), cleared)
  assert evidence["register_failed"] == "cudaHostRegister: CUDA error TypeError: bad pointer"

  class Odd(Model):
    def parameters(self, recurse=True):
      raise RuntimeError("not telling")
  cudart = FakeCudart()
  with host_registration.registered(Odd(), cudart, lambda: None, 0) as evidence:
    pass
  assert evidence == {} and cudart.calls == []


@pytest.mark.parametrize("why", ["small", "no way to clear an error"])
def test_nothing_is_registered_for_a_small_model_or_without_an_error_clearer(why):
  model, cudart = Model(), FakeCudart()
  clear = None if why != "small" else (lambda: None)
  with host_registration.registered(model, cudart, clear,
                                    min_bytes=10**9 if why == "small" else 0) as evidence:
    pass
  assert evidence == {} and cudart.calls == []


def test_the_storages_outlive_the_move_until_unregistered():
  """The move drops the module's references to its CPU tensors; registered keeps their storages
  until it has unregistered them (freed memory must not stay registered), and no longer."""
  model, alive_at_unregister = Model(), []
  storage = weakref.ref(model.big.weight.untyped_storage())

  class Watching(FakeCudart):
    def cudaHostUnregister(self, start):  # pylint: disable=invalid-name
      alive_at_unregister.append(storage() is not None)
      return super().cudaHostUnregister(start)

  _move(model, Watching(), [])
  gc.collect()
  assert alive_at_unregister and all(alive_at_unregister) and storage() is None


def test_off_a_gpu_the_move_is_the_plain_one():
  model = Model()
  moved, evidence = host_registration.to_device(torch, model, torch.device("cpu"), 0)
  assert moved is model and evidence == {}


def test_switched_off_a_gpu_move_is_the_plain_one_and_touches_no_runtime():
  # SandboxConfig.registered_uploads off (on by default): judge and worker move plainly.
  import types  # pylint: disable=import-outside-toplevel

  def no_runtime():
    raise AssertionError("the CUDA runtime was asked for")
  fake_torch = types.SimpleNamespace(cuda=types.SimpleNamespace(cudart=no_runtime))
  gpu = types.SimpleNamespace(type="cuda")
  module = types.SimpleNamespace(to=lambda device: ("moved", device))
  moved, evidence = host_registration.to_device(fake_torch, module, gpu, 0, enabled=False)
  assert moved == ("moved", gpu) and evidence == {}


def test_without_a_cuda_runtime_loaded_there_is_no_error_clearer():
  if torch.cuda.is_available():
    pytest.skip("a CUDA runtime is loaded here")
  assert host_registration.cuda_error_clearer() is None


def test_a_judge_keeps_only_the_known_evidence_of_its_workers_move():
  reply = {"bytes": 1024, "ranges": 2, "register_s": 0.1, "unregister_s": 0.01, "copy_s": 0.02,
           "register_failed": "x" * 500, "extra": "anything", "ranges_bool": True}
  assert host_registration.sanitize(reply) == {
      "bytes": 1024, "ranges": 2, "register_s": 0.1, "unregister_s": 0.01, "copy_s": 0.02,
      "register_failed": "x" * host_registration.ERROR_CHARS}
  assert host_registration.sanitize({"bytes": True, "copy_s": "fast"}) == {}
  assert host_registration.sanitize(["not", "a", "dict"]) == {}


def _fake_torch(cudart, synced):
  import types  # pylint: disable=import-outside-toplevel
  return types.SimpleNamespace(cuda=types.SimpleNamespace(
      cudart=lambda: cudart, synchronize=lambda device: synced.append(device)))


class _Moving:
  """A module whose move to a GPU is recorded (the pages registered when it runs)."""

  def __init__(self, model, cudart, fail=False):
    self.model, self.cudart, self.fail, self.seen = model, cudart, fail, None

  def parameters(self):
    return self.model.parameters()

  def buffers(self):
    return self.model.buffers()

  def to(self, device):
    self.seen = set(self.cudart.registered)
    if self.fail:
      raise RuntimeError("CUDA error: out of memory")
    return ("moved", device)


def test_pages_registered_ahead_stay_so_until_the_move_then_are_let_go(monkeypatch):
  """register_ahead locks the pages now; to_device with it only copies (the pages registered
  while it moves), then unregisters them; the evidence says it was done ahead."""
  import types  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(host_registration, "cuda_error_clearer", lambda: lambda: None)
  cudart, synced = FakeCudart(), []
  fake_torch, gpu = _fake_torch(cudart, synced), types.SimpleNamespace(type="cuda")
  module = _Moving(Model(), cudart)
  ahead = host_registration.register_ahead(fake_torch, module, gpu, 0)
  registered = set(cudart.registered)
  assert registered and ahead.evidence["ahead"] is True and "register_s" in ahead.evidence
  assert not any(c[0] == "unregister" for c in cudart.calls)
  moved, evidence = host_registration.to_device(fake_torch, module, gpu, 0, ahead=ahead)
  assert moved == ("moved", gpu) and module.seen == registered and synced == [gpu]
  assert cudart.registered == set() and evidence is ahead.evidence
  assert {"copy_s", "unregister_s", "bytes", "ranges"} <= set(evidence)
  assert sum(c[0] == "register" for c in cudart.calls) == len(registered)  # not again
  ahead.close()  # again: nothing
  assert sum(c[0] == "unregister" for c in cudart.calls) == len(registered)


def test_a_registration_made_ahead_is_let_go_by_a_failed_move_or_another_modules(monkeypatch):
  import types  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(host_registration, "cuda_error_clearer", lambda: lambda: None)
  cudart = FakeCudart()
  fake_torch, gpu = _fake_torch(cudart, []), types.SimpleNamespace(type="cuda")
  failing = _Moving(Model(), cudart, fail=True)
  ahead = host_registration.register_ahead(fake_torch, failing, gpu, 0)
  with pytest.raises(RuntimeError, match="out of memory"):
    host_registration.to_device(fake_torch, failing, gpu, 0, ahead=ahead)
  assert cudart.registered == set()
  # Registered for one module, asked to move another: let go, the other moved the usual way.
  first, second = _Moving(Model(), cudart), _Moving(Model(), cudart)
  ahead = host_registration.register_ahead(fake_torch, first, gpu, 0)
  moved, evidence = host_registration.to_device(fake_torch, second, gpu, 0, ahead=ahead)
  assert moved == ("moved", gpu) and "ahead" not in evidence and cudart.registered == set()
  # (while the second moved, its own pages were the registered ones, the first's let go)
  spans = [(st.data_ptr(), st.nbytes()) for st in host_registration.cpu_storages(second)]
  assert second.seen == {start for start, _ in host_registration.page_ranges(spans)}


@pytest.mark.parametrize("why", ["small", "off", "cpu"])
def test_nothing_is_registered_ahead_where_nothing_would_be_registered(monkeypatch, why):
  import types  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(host_registration, "cuda_error_clearer", lambda: lambda: None)
  cudart = FakeCudart()
  gpu = types.SimpleNamespace(type="cpu" if why == "cpu" else "cuda")
  ahead = host_registration.register_ahead(_fake_torch(cudart, []), Model(), gpu,
                                           min_bytes=2**40 if why == "small" else 0,
                                           enabled=why != "off")
  assert ahead is None and cudart.calls == []
