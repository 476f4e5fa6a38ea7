"""Progress of the commands that take more than a couple of seconds, on stderr, through tqdm.

Every long command uses these three functions (one look, one switch):

    for row in progress.track(rows, "validate vtrain"):   # a loop of known length
        ...
    with progress.bar("comm sweep", total=n) as bar:        # a counter updated by hand
        bar.update(1)
    with progress.phase("fit compute efficiencies"):        # one opaque step: elapsed time, a heartbeat
        ...

On a terminal, tqdm redraws one line in place. When stderr is not a terminal (a log, CI, a pipe), every
frame is a line of its own and there are few of them: one at the start, one every ``LOG_INTERVAL_S`` at
most, one at the end, and never a carriage return. ``ROOFLINE_PROGRESS=0`` silences them all.

tqdm is imported inside these functions only (about 35-60 ms of import time, measured with
``python -X importtime -c "import tqdm"``): the prediction path (``python -m roofline transformer``) never
imports it.
"""
from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading

# a log line every 10 s at most (and always at the start and the end): a 3-minute fit writes ~20 lines
LOG_INTERVAL_S = 10.0
# a terminal line is redrawn at most every 0.1 s (tqdm's own default mininterval)
TTY_INTERVAL_S = 0.1
# an opaque phase shows its elapsed time every second on a terminal, every 30 s in a log
PHASE_TICK_TTY_S, PHASE_TICK_LOG_S = 1.0, 30.0
# nothing is shown for work that ends within 2 s (issue 19: progress on every command that can take more than two
# seconds); a bad input found at once prints its one error line and no progress
DELAY_S = 2.0
# plain text for logs: no bar glyphs, the counts, the elapsed and remaining time
LOG_FORMAT = "{desc}: {n_fmt}/{total_fmt} ({percentage:.0f} %) [{elapsed}<{remaining}]{postfix}"
LOG_FORMAT_OPEN = "{desc}: {n_fmt} [{elapsed}]{postfix}"          # total unknown
PHASE_FORMAT = "{desc} [{elapsed}]{postfix}"


def enabled() -> bool:
    """False when ``ROOFLINE_PROGRESS`` is 0/no/off/false (any case)."""
    return os.environ.get("ROOFLINE_PROGRESS", "1").strip().lower() not in ("0", "no", "off", "false")


def is_tty(stream) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:          # a closed stream
        return False


class Lines:
    """A file for tqdm that turns each in-place frame into one line: tqdm writes ``'\\r' + frame + padding``;
    this writes ``frame + '\\n'`` (blank frames and a repeat of the last line are dropped)."""

    def __init__(self, stream):
        self.stream = stream
        self.last = None

    def write(self, text: str) -> int:
        for part in text.replace("\n", "\r").split("\r"):
            line = part.rstrip()
            if line and line != self.last:
                self.stream.write(line + "\n")
                self.last = line
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


def _options(desc: str, total, disable: bool, stream, delay: float | None, fmt_log: str | None = None,
             fmt_tty: str | None = None) -> dict:
    stream = sys.stderr if stream is None else stream
    off = disable or not enabled()
    if is_tty(stream):
        kw = {"file": stream, "mininterval": TTY_INTERVAL_S}
        if fmt_tty:
            kw["bar_format"] = fmt_tty
    else:
        kw = {"file": Lines(stream), "mininterval": LOG_INTERVAL_S, "maxinterval": LOG_INTERVAL_S,
              "bar_format": fmt_log or (LOG_FORMAT if total else LOG_FORMAT_OPEN)}
    return {"desc": desc, "total": total, "disable": off, "leave": True, "delay": DELAY_S if delay is None else delay,
            **kw}


@functools.lru_cache(maxsize=None)
def _bar_class():
    from tqdm import tqdm

    class Bar(tqdm):
        def note(self, text: str) -> None:
            """What the loop does now, shown at the next redraw (never a redraw of its own: a log gets no extra
            line)."""
            self.set_postfix_str(text, refresh=False)

        def close(self):
            # tqdm leaves a bar that never drew (its updates came within the log interval) without a last line;
            # one that lasted past the delay gets its last line all the same
            if (not self.disable and hasattr(self, "last_print_t") and self.last_print_t < self.start_t + self.delay
                    and self._time() - self.start_t >= self.delay):
                self.last_print_t = self._time()
            super().close()
    return Bar


def bar(desc: str, total: int | None = None, unit: str = "it", disable: bool = False, stream=None,
        delay: float | None = None):
    """A tqdm counter on stderr (``update(n)``, ``note(text)``; use it in a ``with`` block). Nothing is shown
    when it ends within ``delay`` seconds (default ``DELAY_S``)."""
    return _bar_class()(unit=unit, **_options(desc, total, disable, stream, delay))


def track(iterable, desc: str, total: int | None = None, unit: str = "it", disable: bool = False, stream=None,
          delay: float | None = None):
    """Iterate over ``iterable`` with a progress bar (``total`` defaults to ``len(iterable)`` when it has one)."""
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)
    return _bar_class()(iterable, unit=unit, **_options(desc, total, disable, stream, delay))


@contextlib.contextmanager
def phase(desc: str, disable: bool = False, stream=None, delay: float | None = None):
    """One step whose inside reports nothing (a fit, a symbolic build): once it has lasted ``delay`` seconds, a
    line with its elapsed time, redrawn every second on a terminal and repeated every 30 s in a log, and a last
    line ``desc [mm:ss], done`` (or ``failed``). A step that ends sooner (a bad input found at once) shows nothing."""
    from tqdm import tqdm
    stream = sys.stderr if stream is None else stream
    opts = _options(desc, None, disable, stream, delay, fmt_log=PHASE_FORMAT, fmt_tty=PHASE_FORMAT)
    b = tqdm(**opts)
    stop, shown = threading.Event(), threading.Event()
    tick = PHASE_TICK_TTY_S if is_tty(stream) else PHASE_TICK_LOG_S

    def heartbeat():
        if stop.wait(opts["delay"]):
            return
        while True:
            b.refresh()
            shown.set()
            if stop.wait(tick):
                return

    t = None
    if not b.disable:
        t = threading.Thread(target=heartbeat, daemon=True)
        t.start()
    ok = False
    try:
        yield b
        ok = True
    finally:
        stop.set()
        if t is not None:
            t.join()
        if shown.is_set():
            b.set_postfix_str("done" if ok else "failed", refresh=True)
            b.fp.write("\n")
            b.fp.flush()
        b.delay = float("inf")   # the last line is drawn: tqdm's close only unregisters the bar
        b.close()
