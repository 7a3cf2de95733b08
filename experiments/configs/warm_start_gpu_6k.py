r"""warm_start_gpu_rl.py on 6000 teacher modules instead of 2000: whether CA-GRPO moves held-out
op chains once SFT has seen more chains.

The data, once, on a CPU (the Triton interpreter; about 50 min on 2 cores), stopping after the
tokenizer:

    python -m experiments.warm_start --config=experiments/configs/warm_start_tiny_long.py \
        --workdir=/tmp/warm_start_6k_data --config.num_train_modules=6000 \
        --config.stop_after=tokenizer

then on one GPU:

    python -m experiments.warm_start --config=experiments/configs/warm_start_gpu_6k.py \
        --workdir=/tmp/warm_start_gpu_6k --config.data_from=/tmp/warm_start_6k_data

Why: after warm_start_gpu_rl.py's RL, the new modules it solved more often were almost all
short chains whose op structure SFT or RL had trained on; held-out op chains (never trained on)
did not move. The held-out problems (the same 64 modules: they are drawn apart from the train
ones) need the policy to compose ops in orders it has not seen, so this recipe gives SFT more
chains to learn composing from (3831 op structures instead of 1447) and then the same RL.

Changes from warm_start_gpu_rl.py:
  - 6000 train modules; SFT for 600 steps of 16 packed rows (about 2.5 epochs; 300 steps were
    3.8 epochs of the 2000);
  - 2 clipped passes over each scored batch (learner.epochs_per_batch): an RL step waits 7-50 s
    on the sandbox and trains in under a second, so a second pass is nearly free; 20 steps on a
    cosine set for 48 (96 updates: the measured run stopped at 20 for device time; raising
    learner.num_steps resumes it);
  - every evaluation with 8 samples per problem (4 were too few to see a held-out change: 13 ->
    23 of 232 there did not replicate); no RL-module probe.

Measured on one H200 with 16 CPU cores (2026-12-01, data made on 2 CPU cores in about 50 min;
benchmarks/warm_start_gpu.sh; BENCHMARKS.md, "6000 teacher modules: RL raises the held-out pass
rate, by 1-3 points in two runs"):
  SFT        72 s to held-out loss 0.013
  held-out   105 -> 117 of 464 after 20 RL steps (599 s of sampling, judging and training);
             sampled again with seeds 1 and 2: 95 -> 111 and 102 -> 115; over the three,
             302 -> 343 of 1392 (21.7% -> 24.6%, Cochran-Mantel-Haenszel p = 0.0055 over the
             58 problems; reduction 135 -> 170, softmax 63 -> 81, elementwise 104 -> 92,
             matmul 0 -> 0)
  unseen     137 -> 151 of 512 (CMH p = 0.15)
A second run (--config.sft.seed=1 --config.num_unseen_modules=0, 2026-12-01): SFT 70 s to
held-out loss 0.011; held-out 102 -> 108 of 464 (22.0% -> 23.3%, CMH p = 0.50; reduction and
softmax up, elementwise down, matmul 0, as above). Expect a gain of 1-3 points, not a fixed one.
SFT is not bit-reproducible on the GPU, so another run starts from another checkpoint.
"""

from experiments.configs import warm_start_gpu_rl


def get_config():
  config = warm_start_gpu_rl.get_config()
  config.num_train_modules = 6000
  config.sft.num_steps = 600
  config.sft.optimizer.total_steps = 600
  config.update(eval_samples=8, probe_rl_modules=0)
  config.learner.update(num_steps=20, epochs_per_batch=2)
  config.learner.optimizer.total_steps = 96
  return config
