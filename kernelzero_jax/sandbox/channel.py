"""Messages between the judge and a worker.

On a GPU, tensors travel by CUDA IPC (torch.multiprocessing's reductions): full-size outputs are
not copied. On the CPU they travel by value with plain pickle: torch's shared-memory reductions
would start helper threads and processes inside the worker, which the worker itself counts as
evidence of cheating.
"""

from __future__ import annotations

import pickle
from multiprocessing.reduction import ForkingPickler
from typing import Any


def send(conn, obj: Any, by_value: bool) -> None:
  data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL) if by_value else ForkingPickler.dumps(obj)
  conn.send_bytes(data)


def recv(conn) -> Any:
  return pickle.loads(conn.recv_bytes())
