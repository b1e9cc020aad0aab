"""Interview drills: predict-then-verify snippets and concept questions, one registry for every lesson.

Two kinds of drill:

* ``predict``: a short snippet and a question about what torch does with it (how many graphs, does it
  recompile, does export succeed, what dtype comes out of onnxruntime). The answer is never stored: the
  drill's ``compute`` runs the snippet on the installed torch each time ``answer_of`` is called.
  Its ``form`` (``FORMS``) says what is asked: about a snippet, about a model to read (graphs, breaks,
  recompiles), the line that breaks the graph, the error an export raises, the ONNX graph's op types.
* ``concept``: a question with an answer key drawn from what the lessons demonstrate.

Every drill carries a one-paragraph explanation shown after answering. The same drills are played in a
notebook (``quiz``: an ipywidgets quiz, or plain text where widgets cannot render) and in a terminal::

    .venv/bin/python -m grader drill [--lesson NN] [--count K] [--seed S]   # interactive, reads standard input
    .venv/bin/python -m grader drill --list                                 # list the drills
    .venv/bin/python -m grader drill --verify                               # compute every predict drill live
    .venv/bin/python -m grader drill --interview [N] [--seed S]             # a timed mock interview of N drills

The CLI wiring calls ``add_arguments(parser)`` and ``run(args)``.

The package is laid out like ``grader/checks``: ``bank`` (the ``Drill`` type, the registry, live answers,
selection, feedback), ``measure`` (measurements the predict drills share), ``lessonNN`` (one data module
per lesson; importing it registers its drills), ``interview`` (the timed mock interview's state and
report), ``player`` (the terminal player, ``python -m grader drill``) and ``widget`` (the notebook quiz,
practice or mock interview). Everything is re-exported here, so ``from grader import drills`` and
``drills.DRILLS``, ``drills.select``, ``drills.answer_of``, ... keep working.
"""
from __future__ import annotations

from .bank import (  # noqa: F401  (re-exported)
    DRILLS, FORMS, KINDS, NUMBER_WORDS, Drill, Verified, _add, _clean, _namespace, answer_of, concept, count_text, drills,
    feedback, get, is_correct, normalize, predict, quietly, render, resolve, select, snippet_lines, verify,
)
from .measure import (  # noqa: F401
    _compiles, _export_error, _first_break_line, _fullgraph_ok, _graphs, _onnx, _onnx_ops, _ort, _succeeds, _tmpdir, _yes,
)
from . import lesson00, lesson01, lesson02, lesson03, lesson04, lesson05, lesson06, lesson07, lesson08  # noqa: F401  (registers)
from .interview import DEFAULT_QUESTIONS, PACE_SECONDS, Interview, Outcome, clock_text, draw  # noqa: F401
from .player import add_arguments, main, parser, play, run, run_interview, _isatty, _score, _torch_version  # noqa: F401
from .widget import quiz, _widget_quiz  # noqa: F401

LESSON_MODULES = (lesson00, lesson01, lesson02, lesson03, lesson04, lesson05, lesson06, lesson07, lesson08)
