"""``show()``: the quiz as ipywidgets in a Jupyter kernel, as plain text elsewhere."""

from collections.abc import Iterable

from course_lib.quiz.questions import QUESTIONS, Question
from course_lib.quiz.session import Quiz

MODES = ("auto", "widget", "text")
TEXT_HOWTO = 'Answer with print(quiz.answer("Q1", "A")); for multiple choice give all letters, e.g. "ACD".'


def in_kernel() -> bool:
    """True inside a Jupyter (IPython) kernel, where widgets can be displayed."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def show(quiz: Quiz | None = None, *, questions: Iterable[Question] = QUESTIONS, mode: str = "auto") -> Quiz:
    """Display every question of ``quiz`` (a new ``Quiz(questions)`` if None) and return the quiz.

    ``mode="widget"``: one ``QuestionWidget`` per question (options, a "Check"
    button, feedback and explanation after answering); its plain-text fallback
    is the question text, so static views of a saved notebook still read well.
    ``mode="text"``: the questions printed, answered with ``quiz.answer(...)``.
    ``mode="auto"``: widgets in a Jupyter kernel, text elsewhere.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    quiz = Quiz(questions) if quiz is None else quiz
    if mode == "widget" or (mode == "auto" and in_kernel()):
        from IPython.display import display

        from course_lib.quiz.widget import QuestionWidget

        for q in quiz.questions.values():
            display(QuestionWidget(q, quiz))
    else:
        print("\n\n".join(q.text() for q in quiz.questions.values()))
        print(f"\n{TEXT_HOWTO}")
    return quiz
