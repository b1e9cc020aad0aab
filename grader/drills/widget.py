"""The notebook quiz: an ipywidgets quiz over drills, or plain text where widgets cannot render."""
from __future__ import annotations

from typing import Sequence

from .bank import DRILLS, Drill, answer_of, feedback, render, snippet_lines


def quiz(selection: Sequence[Drill] | None = None, *, use_widgets: bool | None = None):
    """A quiz over ``selection`` (default: every drill): an ipywidgets quiz (choices, Check, Next,
    explanation, running score) in a live frontend, or the questions as plain text otherwise, to be
    answered with ``grader.check`` or in the terminal."""
    selection = list(DRILLS.values()) if selection is None else list(selection)
    if use_widgets is None:
        from ..runtime import widgets_available

        use_widgets = widgets_available()
    if not use_widgets:
        for number, drill in enumerate(selection, 1):
            print(render(drill, number, len(selection)))
            print()
        print("(widgets are not available here: answer these in the exercises below, or in a terminal with "
              "`python -m grader drill`)")
        return None
    return _widget_quiz(selection)


def _widget_quiz(selection: Sequence[Drill]):
    import html

    import ipywidgets as w

    from ..markup import inline

    state = {"index": 0, "correct": 0, "answered": 0, "checked": False}
    title = w.HTML()
    snippet = w.HTML()
    choices = w.RadioButtons(options=[], layout=w.Layout(width="max-content"))
    typed = w.Text(placeholder="your answer")
    check = w.Button(description="Check", button_style="primary")
    following = w.Button(description="Next")
    result = w.Output()
    score = w.Label()

    def show():
        drill = selection[state["index"]]
        state["checked"] = False
        title.value = (f"<b>{state['index'] + 1}/{len(selection)} · {html.escape(drill.id)}</b> "
                       f"<i>({drill.kind})</i><br>{inline(drill.question)}")
        shown = "\n".join(snippet_lines(drill)) if drill.form == "break_line" else drill.snippet
        snippet.value = f"<pre>{html.escape(shown)}</pre>" if drill.snippet else ""
        choices.options = list(drill.choices)
        choices.value = None
        choices.layout.display = "" if drill.choices else "none"
        typed.value = ""
        typed.layout.display = "none" if drill.choices else ""
        result.clear_output()
        score.value = f"score: {state['correct']}/{state['answered']}"

    def on_check(_):
        drill = selection[state["index"]]
        response = choices.value if drill.choices else typed.value
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
    return w.VBox([title, snippet, choices, typed, w.HBox([check, following, score]), result])
