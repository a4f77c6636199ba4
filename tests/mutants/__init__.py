"""Submissions that test the grader, one module per exercise: ``tests/mutants/exNN_<name>.py``.

An exercise's module is named like its grader (``course_tools/grading/exercises/exNN_<name>.py``) and defines
``MUTANTS``: ``Mutant(fn, targets, mistake)`` for each plausible wrong answer: ``targets`` are the grader
tests it is meant to fail, ``mistake`` says in plain words what it does (one line, for the instructor
guide's common mistakes). ``ALTERNATIVES``: correct answers unlike the solution (other random draws,
other formulas), which must score full marks. ``TRIVIAL``: answers of the right shape that compute
nothing (zeros, a copy of an input, random numbers), which must score 0. Optionally ``CHEAT`` and
``SCRIBBLE`` (answers that write on their inputs, before or after computing), ``MISTAKE_FEEDBACK`` and
``TRIVIAL_FEEDBACK`` ((answer name, test, what its feedback says)) and ``EXACTLY_FAILS`` ((mutant name,
the only tests it fails)). ``common`` holds what several exercises share, ``misbehaving`` the submissions
that hang, crash, print or cannot be unpickled. ``tests/grader_mutants.py`` gathers them all.
"""

import sys

import cloudpickle

# The grader's worker processes cannot import tests/: an answer graded there travels by value, and so must
# the helpers it calls from the other modules here (the grader registers only the answer's own module).
cloudpickle.register_pickle_by_value(sys.modules[__name__])
