"""`calibrate from-runs` on NVIDIA's Megatron-Bridge runs (the bundled nemo_perf.csv): what the fitted host terms
say about those hosts, judged leave-one-model-out (the figures of docs/from-runs.md, "Modern MoE runs").

    python benchmarks/from_runs_nemo.py

For each GPU (H100, GB200), the tier-A rows of that GPU are written to a temporary runs file and fitted on that
GPU's bundled profile: the default terms, then `--fit host_moe` (an MoE layer's extra host time), then `--fit
moe_sync` (the GPU idle after each eager MoE forward's synchronization). Every figure is
the command's own report: the cross-validated error leaves one model out at a time (the held-out model's rows never
enter its fold's fit), beside BASE's error on the same rows. A fit that no probed value improves is refused by the
command; the table says so. Bundled profiles are never changed.
"""
import contextlib
import io
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from roofline.base.errors import InputError  # noqa: E402
from roofline.views import validate  # noqa: E402
from roofline.views.calibrate import from_runs as fr  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from from_runs_report import split_csv  # noqa: E402

GPUS = ("h100-sxm", "gb200")
FITS = (None, "host_moe", "moe_sync")


def pct(x) -> str:
    return f"{100 * x:.1f} %"


def main() -> int:
    src = validate.dataset_path("nemo")
    print("Runs: nemo_perf.csv tier A, one GPU at a time, priced on that GPU's bundled profile; errors are MAPE of the "
          "step time; CV = leave one model out\n")
    print("| GPU | rows | terms asked | fitted | BASE | in-sample | CV |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for gpu in GPUS:
            path = split_csv(src, Path(tmp), gpu, lambda r, g=gpu: r["gpu_id"] == g and r.get("tier") == "A")
            for fit in FITS:
                asked = fit or "default"
                try:
                    with contextlib.redirect_stderr(io.StringIO()):
                        res = fr.calibrate(path, gpu, fit=fit, group_by="model")
                except InputError as exc:
                    print(f"| {gpu} | | {asked} | refused: {str(exc).split(': ', 2)[-1]} | | | |")
                    continue
                f = res.fit
                fitted = ", ".join(f"{t} {fr._fmt(t, f.values[t])} (BASE {fr._fmt(t, f.start[t])})" for t in f.terms)
                print(f"| {gpu} | {len(res.runs.cases)} | {asked} | {fitted} | {pct(res.base_error['mape'])} | "
                      f"{pct(res.in_sample['mape'])} | **{pct(res.cv['mape'])}** |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
