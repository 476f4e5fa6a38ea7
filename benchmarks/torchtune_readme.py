"""torchtune's own throughput table, priced with the torchtune stack (roofline/spec/stacks/torchtune.yaml).

    python benchmarks/torchtune_readme.py

pytorch/torchtune README.md @bd2a0fc7c, "Optimization flags": Llama 3.2 3B, full_finetune_single_device, batch size
2, max sequence length 4096, bf16, one A100; each technique added on top of the previous one. The rows priced here are
those whose every technique the model has: the dataset packed to 4096 (every sample full length), torch.compile of the
model and the loss (fused elementwise kernels; the loss in the compiled class), chunked cross-entropy (its memory is the
compiled class's, stacks/torchtune.yaml loss_kernel), then activation checkpointing (whole layers). The first two rows
(unpacked samples, eager) and the later ones (optimizer step fused into backward, activation offload, 8-bit AdamW,
LoRA) are left out. The table's memory column is not compared: the single-device config's default optimizer is
bitsandbytes' PagedAdamW8bit (recipes/configs/llama3_2/3B_full_single_device.yaml), paged 8-bit state the table does
not separate. Nothing is fitted to these rows: a check of the stack's defaults only.
"""
from __future__ import annotations

from roofline.model.predict import predict
from roofline.spec.resolve import resolve

SOURCE = "pytorch/torchtune README.md @bd2a0fc7c, 'Optimization flags' table (Llama 3.2 3B, batch 2 x 4096, bf16, A100)"
ROWS = (
    # (technique row, measured tokens/s, recompute)
    ("+ Packed Dataset + Compile", 8998, "none"),
    ("+ Chunked Cross Entropy", 9174, "none"),
    ("+ Activation Checkpointing", 7210, "full"),
)
TOKENS = 2 * 4096


def rows():
    out = []
    for label, measured, rc in ROWS:
        spec = resolve("llama3.2-3b", dict(dp=1, micro_batch=2, global_batch=2, recompute=rc, sharding="none",
                                           eager_elementwise=False, loss_kernel="compiled"),
                       "a100-sxm4-80gb", "torchtune", model_fields={"seq_len": 4096})
        t = predict(spec).step_time.to("s").magnitude
        out.append((label, measured, TOKENS / t, TOKENS / t / measured - 1))
    return out


def main():
    print(SOURCE)
    print("| row | measured tokens/s | predicted tokens/s | error |")
    print("|---|---|---|---|")
    for label, m, p, e in rows():
        print(f"| {label} | {m} | {p:.0f} | {100 * e:+.1f} % |")


if __name__ == "__main__":
    main()
