"""``QuestionWidget``: one quiz question as ipywidgets, with a "Check" button that explains after answering.

The explanation's pointers ("See notebooks/05_the_ledger.ipynb (section ...)") are rendered as links.
"""

import html

import ipywidgets as widgets

from course_lib.quiz.links import to_html
from course_lib.quiz.questions import Question
from course_lib.quiz.session import Quiz


class QuestionWidget(widgets.VBox):
    """Prompt, options (radio buttons, or check boxes for multiple choice), "Check" button, feedback.

    Pressing "Check" sends the selected letters to ``quiz.answer``, which
    records them (the latest answer counts). ``select`` and ``selected`` set and read the
    choice from code (tests, or typing an answer in).
    """

    def __init__(self, question: Question, quiz: Quiz) -> None:
        self.question, self.quiz = question, quiz
        labels = [f"{letter}. {text}" for letter, text in zip(question.letters, question.options, strict=True)]
        if question.multiple:
            self.choices = [widgets.Checkbox(value=False, description=label, indent=False) for label in labels]
        else:
            self.choices = [widgets.RadioButtons(options=list(zip(labels, question.letters)), value=None)]
        self.button = widgets.Button(description="Check", button_style="primary")
        self.feedback = widgets.HTML(value="")
        self.button.on_click(self._check)
        header = widgets.HTML(value=f"<b>{question.id}</b> <i>({question.kind})</i> {html.escape(question.prompt)}")
        layout = widgets.Layout(width="100%")
        super().__init__([header, *self.choices, self.button, self.feedback], layout=layout)

    def selected(self) -> str:
        """The selected letters, sorted ("" if none)."""
        if self.question.multiple:
            return "".join(letter for letter, box in zip(self.question.letters, self.choices, strict=True) if box.value)
        return self.choices[0].value or ""

    def select(self, answer: str) -> None:
        """Select exactly the letters of ``answer`` (ValueError if it is not a valid answer)."""
        letters = self.question.canonical(answer)
        if self.question.multiple:
            for letter, box in zip(self.question.letters, self.choices, strict=True):
                box.value = letter in letters
        else:
            self.choices[0].value = letters

    def _check(self, _button: widgets.Button) -> None:
        answer = self.selected()
        if not answer:
            self.feedback.value = "<i>Pick an option first.</i>"
            return
        feedback = self.quiz.answer(self.question.id, answer)
        colour = "green" if feedback.correct else "firebrick"
        verdict, explanation = feedback.text().split("\n", 1)
        self.feedback.value = f'<div style="color:{colour}"><b>{html.escape(verdict)}</b></div>' + "<br>".join(
            to_html(line) for line in explanation.split("\n"))  # the pointers become links

    def _repr_mimebundle_(self, **kwargs: object) -> dict:
        """The widget for Jupyter, and the question text instead of ``VBox(...)`` for static views."""
        bundle = super()._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = self.question.text()
        return bundle
