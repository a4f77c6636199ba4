"""The interview quiz of notebook 10: ten questions, graded by salted hash, explained after a first answer.

``show()`` renders every question (ipywidgets in a Jupyter kernel, plain text
elsewhere) and returns the ``Quiz`` that records the first answer to each;
``Quiz.answers_code()`` prints them as the ``quiz_answers()`` function that
exercise ``ex08_interview_quiz`` grades (``python -m course_lib.grade``).
The key is stored hashed and the explanations sealed (see ``keys``): that stops
reading the answers from the files, not guessing them.
"""

from course_lib.quiz.questions import QUESTIONS, Question, question
from course_lib.quiz.render import show
from course_lib.quiz.session import Feedback, Quiz

__all__ = ["QUESTIONS", "Feedback", "Question", "Quiz", "question", "show"]
