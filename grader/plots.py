"""Plot helpers: every figure says what it measured, in which units, on which device and torch."""
from __future__ import annotations

from typing import Sequence

from .runtime import environment


def figure(title: str, xlabel: str, ylabel: str, *, logx: bool = False, logy: bool = False, size=(7.5, 4.2)):
    """A labelled figure and axes, stamped with the device and torch version it was measured on."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=size, layout="constrained")
    fig.suptitle(title)
    ax.set_title(f"measured on {environment().label}", fontsize=7, color="0.4", loc="right")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.grid(True, which="major", alpha=0.3)
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
