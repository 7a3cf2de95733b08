"""Imported by the worker server of a judge that serves several jobs (judge_host.py), before it
forks any worker: what the warm server imports (zygote.preload), for the device in
judge_host.DEVICE_ENV. Without it each worker would import torch itself."""

import os

from kernelzero_jax.sandbox import zygote

zygote.preload(os.environ.get("KZ_WORKER_SERVER_DEVICE", "cuda"))
