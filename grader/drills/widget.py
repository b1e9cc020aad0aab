"""The notebook quiz: an ipywidgets quiz over drills (practice, or a timed mock interview), or plain text
where widgets cannot render."""
from __future__ import annotations

import html
import threading
import time
from typing import Callable, Sequence

from .bank import DRILLS, Drill, answer_of, feedback, render, snippet_lines
from .interview import Interview, clock_text, draw


def quiz(selection: Sequence[Drill] | None = None, *, use_widgets: bool | None = None, interview: bool = False,
         clock: Callable[[], float] = time.monotonic):
    """A quiz over ``selection`` (default: every drill; with ``interview=True``, a mock interview's
    ``interview.draw()``): an ipywidgets quiz (choices, Check, Next, explanation, running score) in a live
    frontend, or the questions as plain text otherwise. ``interview=True`` asks the drills against a clock, with no feedback until the last answer
    (or Stop), then shows the score, the times and every explanation."""
    if selection is None:
        selection = draw() if interview else list(DRILLS.values())
    selection = list(selection)
    live = use_widgets is None
    if use_widgets is None:
        from ..runtime import widgets_available

        use_widgets = widgets_available()
    if not use_widgets:
        for number, drill in enumerate(selection, 1):
            print(render(drill, number, len(selection)))
            print()
        where = ".venv/bin/python -m grader drill" + (" --interview" if interview else "")
        print(f"(widgets are not available here: `{where}` plays drills in a terminal)")
        return None
    if interview:
        return _widget_interview(selection, clock=clock, tick=live)
    return _widget_quiz(selection)


class _Card:
    """The widgets that show one drill: title, snippet, choices (or a text box for a short answer)."""

    def __init__(self):
        import ipywidgets as w

        self.title = w.HTML()
        self.snippet = w.HTML()
        self.choices = w.RadioButtons(options=[], layout=w.Layout(width="max-content"))
        self.typed = w.Text(placeholder="your answer")

    def show(self, drill: Drill, number: int, total: int) -> None:
        from ..markup import inline

        self.title.value = (f"<b>{number}/{total} · {html.escape(drill.id)}</b> "
                            f"<i>({drill.kind})</i><br>{inline(drill.question)}")
        shown = "\n".join(snippet_lines(drill)) if drill.form == "break_line" else drill.snippet
        self.snippet.value = f"<pre>{html.escape(shown)}</pre>" if drill.snippet else ""
        self.choices.options = list(drill.choices)
        self.choices.value = None
        self.choices.layout.display = "" if drill.choices else "none"
        self.typed.value = ""
        self.typed.layout.display = "none" if drill.choices else ""

    def response(self, drill: Drill):
        return self.choices.value if drill.choices else self.typed.value

    @property
    def children(self) -> list:
        return [self.title, self.snippet, self.choices, self.typed]


def _widget_quiz(selection: Sequence[Drill]):
    import ipywidgets as w

    state = {"index": 0, "correct": 0, "answered": 0, "checked": False}
    card = _Card()
    check = w.Button(description="Check", button_style="primary")
    following = w.Button(description="Next")
    result = w.Output()
    score = w.Label()

    def show():
        drill = selection[state["index"]]
        state["checked"] = False
        card.show(drill, state["index"] + 1, len(selection))
        result.clear_output()
        score.value = f"score: {state['correct']}/{state['answered']}"

    def on_check(_):
        drill = selection[state["index"]]
        response = card.response(drill)
        result.clear_output()
        with result:
            if not response:
                print("pick an answer first")
                return
            if state["checked"]:
                print("already checked: press Next")
                return
            if drill.kind == "predict":
                print("running the snippet on the installed torch...")
            truth = answer_of(drill)
            right, text = feedback(drill, response, truth)
            result.clear_output()
            print(text)
        state["checked"] = True
        state["answered"] += 1
        state["correct"] += right
        score.value = f"score: {state['correct']}/{state['answered']}"

    def on_next(_):
        state["index"] = (state["index"] + 1) % len(selection)
        show()

    check.on_click(on_check)
    following.on_click(on_next)
    show()
    return w.VBox([*card.children, w.HBox([check, following, score]), result])


def _widget_interview(selection: Sequence[Drill], clock: Callable[[], float] = time.monotonic, tick: bool = False):
    """The mock interview as widgets: Answer records the answer and its time and moves on (no verdict),
    Stop ends early; the clock label shows this question's time and the total (refreshed every second by a
    background thread when ``tick``, otherwise at each click); the report replaces the question at the end."""
    import ipywidgets as w

    session = Interview(selection, clock=clock)
    card = _Card()
    answer = w.Button(description="Answer", button_style="primary")
    stop = w.Button(description="Stop")
    timer = w.Label()
    note = w.Label()
    report = w.HTML()

    def refresh():
        if session.done:
            timer.value = f"finished in {clock_text(session.elapsed())}"
        else:
            timer.value = (f"this question {clock_text(clock() - session.asked_at)} · "
                           f"total {clock_text(session.elapsed())}")

    def end():
        for widget in (answer, stop, card.choices, card.typed):
            widget.disabled = True
        note.value = "computing the live answers on the installed torch..."
        outcome = session.finish()
        note.value = f"score: {outcome.correct}/{outcome.asked}"
        report.value = f"<pre>{html.escape(outcome.text)}</pre>"
        refresh()

    def on_answer(_):
        if session.done:
            return
        drill = session.current
        response = card.response(drill)
        if not response:
            note.value = "pick an answer first"
            return
        seconds = session.answer(response)
        note.value = f"answered in {clock_text(seconds)}"
        if session.done:
            end()
            return
        card.show(session.current, len(session.asked) + 1, len(session.selection))
        refresh()

    def on_stop(_):
        if not session.done:
            session.stop()
            end()

    answer.on_click(on_answer)
    stop.on_click(on_stop)
    session.start()
    card.show(session.current, 1, len(session.selection))
    refresh()
    if tick:
        def ticking():
            while not session.done and session.elapsed() < 3600:  # an abandoned interview stops ticking after an hour
                time.sleep(1)
                refresh()

        threading.Thread(target=ticking, name="drill-interview-clock", daemon=True).start()
    return w.VBox([*card.children, w.HBox([answer, stop, timer]), note, report])
