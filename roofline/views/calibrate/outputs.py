"""Where a calibration writes (``--out NAME``: NAME.yaml + NAME.samples.csv) and which torch device it runs on;
shared by the calibrate subcommands and the benchmarks they run."""
from __future__ import annotations

import sys
from pathlib import Path

from ...base.errors import InputError


def out_paths(name: str, create: bool = True) -> tuple[Path, Path, str]:
    """``--out`` -> (yaml path, samples csv path, profile id); ``create`` makes the folder (else only checks the
    name, so that a command can check it before its work and write nothing when that fails)."""
    if name.endswith("/"):
        d = Path(name)
        if create:
            d.mkdir(parents=True, exist_ok=True)
        pid = d.resolve().name
        return d / f"{pid}.yaml", d / f"{pid}.samples.csv", pid
    base = Path(name)
    if base.suffix in (".yaml", ".yml"):
        base = base.with_suffix("")
    if not base.name:
        raise InputError(f"--out {name!r}: expected a name like 'my-gpu' or a folder ending with '/'")
    if create:
        base.parent.mkdir(parents=True, exist_ok=True)
    return base.with_name(base.name + ".yaml"), base.with_name(base.name + ".samples.csv"), base.name


def write_outputs(name: str, yaml_text: str, csv_text: str) -> Path:
    from ...base.schema import write_text_atomic
    y, c, _ = out_paths(name)
    write_text_atomic(c, csv_text)          # each file whole or not at all; the profile last
    write_text_atomic(y, yaml_text)
    print(f"wrote {y} and {c}", file=sys.stderr)
    return y


def torch_device(name: str, command: str):
    """torch.device for ``--device``; one-line InputError when torch is missing, the name is not a device, or
    CUDA is asked for where there is none."""
    try:
        import torch
    except ImportError:
        raise InputError(f"calibrate {command} needs torch (pip install 'roofline[calibrate]')") from None
    try:
        dev = torch.device(name)
    except RuntimeError:
        raise InputError(f"--device {name}: not a torch device (cpu, cuda, cuda:N)") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"--device {name}: CUDA is not available here (use --device cpu)")
    if dev.type == "cuda" and (dev.index or 0) >= torch.cuda.device_count():
        raise InputError(f"--device {name}: only {torch.cuda.device_count()} CUDA device(s) here")
    if dev.type not in ("cpu", "cuda"):
        raise InputError(f"--device {name}: calibrate {command} runs on cpu or cuda devices")
    return dev


def print_report(rep: dict, defects=()) -> None:
    print(f"{'class':8} {'dir':4} {'eta':>6} {'mu':>6} {'t0':>9} {'MAPE':>7} {'n':>6} {'flagged':>7}")
    for cls, (r, _) in rep["compute"].items():
        for d, f in r.fits.items():
            print(f"{cls:8} {d:4} {f.eta:6.3f} {f.mu:6.3f} {f.t0 * 1e6:7.1f}us {r.mape[d]:7.1%} {r.n[d]:6d} "
                  f"{int(r.flagged[d].sum()):7d}")
    for (kind, link), f in rep.get("links", {}).items():
        print(f"{kind:4} {link:5} call {f.call * 1e6:7.2f} us  alpha {f.alpha * 1e6:8.2f} us  busbw {f.busbw / 1e9:8.2f} GB/s  "
              f"MAPE {f.mape:6.1%}  "
              f"n {f.n}")
    for d in defects:
        print(f"defect: {d}")
