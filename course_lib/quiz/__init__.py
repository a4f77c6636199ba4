"""The interview quiz of notebook 10: ten questions, each checked and explained after an answer.

``show()`` renders every question (ipywidgets in a Jupyter kernel, plain text
elsewhere) and returns the ``Quiz`` that records the latest answer to each. The
key is a plaintext file outside the package (``key``): an honest self-check in
self-study. The graded quiz is exercise ``ex08_interview_quiz``: questions from a
bank with numbers drawn from the student's id (``course_tools.grading.quiz_bank``).
"""

from course_lib.quiz.questions import QUESTIONS, Question, question
from course_lib.quiz.render import show
from course_lib.quiz.session import Feedback, Quiz

__all__ = ["QUESTIONS", "Feedback", "Question", "Quiz", "question", "show"]
