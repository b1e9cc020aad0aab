"""Plot helpers: every figure says what it measured, in which units, on which device and torch."""
from __future__ import annotations

from typing import Sequence

from . import timing
from .runtime import environment

_mark = 0  # how many timing notes existed when the previous figure was made


def _busy_note(ax, since: int) -> None:
    """A red line on the axes, filled in when the figure is drawn, if any timing since ``since`` was flagged."""
    from matplotlib.text import Text

    class BusyNote(Text):
        def draw(self, renderer):
            notes = timing.notes_since(since)
            self.set_text("" if not notes else
                          f"measured on a busy machine ({len(notes)} timing(s) flagged): rerun when it is idle")
            super().draw(renderer)

    ax.add_artist(BusyNote(0.01, 0.99, "", transform=ax.transAxes, color="tab:red", fontsize=8,
                           va="top", ha="left", fontweight="bold"))


def figure(title: str, xlabel: str, ylabel: str, *, logx: bool = False, logy: bool = False, size=(7.5, 4.2),
           threads: int | None = None, cpu: bool = False):
    """A labelled figure and axes, stamped with the device, thread count and torch version it was measured
    on: the current ones, unless ``threads`` (a race on one thread, drawn after the pool is restored) or
    ``cpu`` (CPU work on a machine with a GPU) say otherwise. If a timing made since the previous figure
    (before this one or while it is filled) was flagged as noisy, the drawn figure says that the machine
    was busy."""
    import matplotlib.pyplot as plt

    from .runtime import _cpu_name

    global _mark
    since, _mark = _mark, len(timing.notes_since(0))

    env = environment()
    device = f"CPU ({_cpu_name()})" if cpu else env.device_name
    n = env.threads if threads is None else threads
    fig, ax = plt.subplots(figsize=size, layout="constrained")
    fig.suptitle(title)
    ax.set_title(f"measured on {device}, {n} thread{'' if n == 1 else 's'} · torch {env.torch_version}",
                 fontsize=7, color="0.4", loc="right")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.grid(True, which="major", alpha=0.3)
    _busy_note(ax, since)
    return fig, ax


def bars(ax, labels: Sequence[str], values: Sequence[float], *, fmt: str = "{:.3g}", colors=None):
    """Horizontal bars with their values written at the end."""
    ypos = range(len(labels))
    ax.barh(list(ypos), values, color=colors)
    ax.set_yticks(list(ypos), labels)
    ax.invert_yaxis()
    for y, v in zip(ypos, values):
        ax.text(v, y, " " + fmt.format(v), va="center", fontsize=8)
    return ax
