"""Framework defaults: what a plan means when the user names only tp/pp/dp.

Each entry is the configuration a framework's published large runs use, written down so that
nothing is silently assumed (``python -m roofline transformer --framework ...``; see
docs/concepts.md). Explicit flags override them.

- ``megatron-core`` (2024, Megatron-Core r0.8 recommended settings, as in NVIDIA's H100 runs):
  flash attention, bf16 with fp32 main grads, sequence parallelism when tp > 1, distributed
  optimizer, overlapped gradient reduce-scatter and parameter all-gather
  (--overlap-grad-reduce --overlap-param-gather), TP overlap off (needs --tp-comm-overlap).
- ``megatron-lm-2021`` (Narayanan et al. 2021, Korthikanti et al. 2022 baselines): unfused
  attention (fused scale-mask-softmax), dropout 0.1, fp16, no SP, no distributed optimizer,
  gradient all-reduce after the backward pass (not overlapped), in fp16: Megatron-LM reduces the
  gradient buffer in the parameter dtype unless --accumulate-allreduce-grads-in-fp32 is given, which
  is opt-in for fp16 and forced only for bf16 (megatron/arguments.py).
- ``megatron-deepspeed`` (BigScience / vTrain measurements): as megatron-lm-2021 (unfused
  attention, fp16, no overlap).
- ``fsdp`` (PyTorch FSDP FULL_SHARD): flash attention, bf16, ZeRO-3 sharding with prefetching
  (parameter gathers overlapped with compute), reduce-scatter overlapped with backward.
- ``plain``: nothing overlapped, flash attention, no sharding.
"""
from __future__ import annotations

from .errors import InputError

FRAMEWORKS = {
    "megatron-core": {"model": {"attention": "flash"},
                      "plan": {"sequence_parallel": True, "sharding": "distributed", "overlap_grad_reduce": 1.0,
                               "overlap_param_gather": 1.0, "overlap_tp": 0.0, "dtype": "bf16", "grad_dtype": "fp32"}},
    "megatron-lm-2021": {"model": {"attention": "unfused", "dropout": True},
                         "plan": {"sequence_parallel": False, "sharding": "none", "overlap_grad_reduce": 0.0,
                                  "dtype": "fp16", "grad_dtype": "fp16"}},
    "megatron-deepspeed": {"model": {"attention": "unfused", "dropout": True},
                           "plan": {"sequence_parallel": False, "sharding": "none", "overlap_grad_reduce": 0.0,
                                    "dtype": "fp16", "grad_dtype": "fp16"}},
    "fsdp": {"model": {"attention": "flash"},
             "plan": {"sharding": "fsdp", "overlap_grad_reduce": 1.0, "overlap_param_gather": 1.0, "dtype": "bf16",
                      "grad_dtype": "fp32"}},
    "plain": {"model": {"attention": "flash"}, "plan": {}},
}


def defaults(name: str) -> dict:
    if name not in FRAMEWORKS:
        raise InputError(f"unknown framework {name!r}; known: {', '.join(FRAMEWORKS)}")
    return FRAMEWORKS[name]
