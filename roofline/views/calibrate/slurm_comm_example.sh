#!/bin/bash
# Collective calibration on 2 nodes x 8 GPUs with SLURM + torchrun (one launcher task per node).
# Fits both links: intra = the 8 GPUs of each node (TP groups), inter = one GPU per node for every
# local rank at once (DP groups across nodes) and cross-node p2p pairs (PP). --nodes 1: intra only.
#SBATCH --job-name=roofline-comm
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --time=00:30:00
set -euo pipefail
MASTER=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
srun torchrun --nnodes "$SLURM_NNODES" --nproc-per-node 8 \
     --rdzv-backend c10d --rdzv-endpoint "$MASTER:29500" --rdzv-id "$SLURM_JOB_ID" \
     -m roofline calibrate comm --out "comm-${SLURM_NNODES}n" --max-size 1GiB
