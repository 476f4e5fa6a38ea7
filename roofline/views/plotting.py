"""matplotlib (optional extra ``plot``) for the ``--plot`` / ``--timeline`` figures: one import path and one
way to save, so that a missing matplotlib, an unknown image suffix or an unwritable path is a one-line
:class:`InputError` naming the flag. Checked before the work that makes the figure (``check``).
"""
from __future__ import annotations

from pathlib import Path

from ..base.errors import InputError


def pyplot(flag: str):
    """matplotlib.pyplot on the non-interactive Agg backend, or InputError naming ``flag``."""
    try:
        import matplotlib
    except ImportError:
        raise InputError(f"{flag} needs matplotlib: pip install 'roofline[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def check(path: str, flag: str) -> None:
    """InputError unless matplotlib is installed, ``path``'s suffix is an image format it writes and the folder exists."""
    pyplot(flag)
    from matplotlib.backend_bases import FigureCanvasBase
    formats = FigureCanvasBase.get_supported_filetypes()
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in formats:
        raise InputError(f"{flag} {path}: the file name must end in an image format ({', '.join('.' + f for f in sorted(formats))})")
    parent = Path(path).parent
    if not parent.is_dir():
        raise InputError(f"{flag} {path}: folder {parent} does not exist")


def save(fig, path: str, flag: str, dpi: int = 120) -> None:
    """Write and close ``fig`` atomically (a temporary file in the same folder, moved onto ``path`` only once the
    whole figure is written); a bad path is an InputError naming ``flag``."""
    from ..base import schema

    plt = pyplot(flag)
    fmt = Path(path).suffix.lower().lstrip(".") or None
    try:
        with schema.atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=dpi, format=fmt)
    except OSError as exc:
        raise InputError(f"cannot write {flag} {path}: {exc.strerror or exc}") from None
    except ValueError as exc:           # unknown format, non-finite axis limits
        raise InputError(f"cannot write {flag} {path}: {str(exc).splitlines()[0] if str(exc) else exc}") from None
    finally:
        plt.close(fig)
