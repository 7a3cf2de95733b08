r"""KernelZero's main job: the Proposer and the Coder co-evolve.

    python -m experiments.coevolve --config=experiments/configs/coevolve_tiny.py \
        --workdir=/tmp/coevolve_tiny [--config.num_rounds=4 --config.backend=triton ...]

The config file returns a ConfigDict mirroring `kernelzero_jax.coevolve.CoevolveConfig`; every
field can be overridden with --config.x=y, and an unknown field is an error. Rerunning the same
command resumes from the workdir's latest checkpoint (both policies and the module pool).
"""

from experiments import config_main  # first: it sets up the environment before jax loads
from kernelzero_jax import coevolve

if __name__ == "__main__":
  config_main.run(coevolve.CoevolveConfig, coevolve.run)
