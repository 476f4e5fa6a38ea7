"""MaxText on H100, as NVIDIA's DGX Cloud benchmarking recipes ran it, priced with the maxtext stack
(roofline/spec/stacks/maxtext.yaml): the stack's defaults against two published step times.

    python benchmarks/maxtext_dgxc.py

The step times are the example log lines of NVIDIA's NGC "DGXC Benchmarking" recipes (catalog.ngc.nvidia.com,
nvidia/dgxc-benchmarking resources, "Expected Performance"): "completed step: 49, seconds: ..." after 50 steps of
synthetic data. Their layouts are the recipes' tables: FSDP over every GPU (ici_fsdp 8 x dcn_fsdp), no TP or PP,
per_device_batch_size 2, no gradient accumulation. Nothing is fitted to them: a check of the stack's defaults only.
"""
from __future__ import annotations

from roofline.model.predict import predict
from roofline.spec.resolve import resolve

RUNS = (
    # (label, model preset, GPUs, global batch, sequence, measured s, source)
    ("Llama 2 70B BF16, 64 H100", "llama2-70b", 64, 128, 4096, 7.908,
     "maxtext-llama2-70b-dgxc-benchmarking 25.01.1: FSDP=64 GBS=128 MBS=2, 'seconds: 7.908'"),
    ("Llama 3 70B BF16, 128 H100", "llama3-70b", 128, 256, 8192, 15.570,
     "maxtext-llama3-70b-dgxc-benchmarking 25.02 (layout: 25.04.01's table, dcn_FSDP 16 x ici_FSDP 8, "
     "per_device_batch_size 2, GBS 256): 'seconds: 15.570'"),
)


def rows():
    out = []
    for label, model, n, gb, seq, measured, src in RUNS:
        spec = resolve(model, dict(dp=n, micro_batch=gb // n, global_batch=gb), "h100-sxm", "maxtext",
                       model_fields={"seq_len": seq})
        t = predict(spec).step_time.to("s").magnitude
        out.append((label, measured, t, t / measured - 1, src))
    return out


def main():
    print("| run | measured s | predicted s | error | source |")
    print("|---|---|---|---|---|")
    for label, m, t, e, src in rows():
        print(f"| {label} | {m:.3f} | {t:.3f} | {100 * e:+.1f} % | {src} |")


if __name__ == "__main__":
    main()
