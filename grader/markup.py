"""Inline Markdown in the grader's HTML. Check messages, hints and drill questions are written the way the
lessons are, with `code` spans; the HTML views show those spans as code (text views keep the backticks).
Only code spans are rendered: a message such as ``x*2+1 * 3`` must not turn into emphasis."""
from __future__ import annotations

import html
from functools import cache


@cache
def _parser():
    """mistune, on first use: ``import grader`` needs only the standard library (grader/colab.py runs before the
    course's packages are installed)."""
    import mistune

    parser = mistune.create_markdown(escape=True)
    parser.inline.rules = ["codespan"]  # CommonMark code spans (``a`b`` included), nothing else
    return parser


def inline(text: str) -> str:
    """``text`` as HTML: escaped, its code spans as ``<code>``."""
    return "".join(
        f"<code>{html.escape(token['raw'])}</code>" if token["type"] == "codespan" else html.escape(token["raw"])
        for token in _parser().inline(str(text), {})
    )
