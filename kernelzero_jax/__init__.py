"""kernelzero_jax: a JAX/Flax reimplementation of KernelZero (Proposer/Coder co-evolution for GPU kernels)."""

__version__ = "0.1.0"
