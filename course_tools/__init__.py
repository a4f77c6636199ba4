"""The course's tools: what grades, measures, builds and runs the course, kept out of ``course_lib``
(the library a learner reads to see how linear attention works).

``course_tools`` imports ``course_lib``; ``course_lib`` never imports ``course_tools``
(``tests/test_packages.py`` walks the imports). Two parts reach learners, because their notebooks
call them, and travel in the student copy (``workshop.release.INCLUDED``):

* ``grading``: ``check()`` in the exercises, the per-exercise grader tests and the process that runs
  a student's function; ``grade``: the batch command over a folder of notebooks.
* ``bench``: the benchmark (``python -m course_tools.bench``), whose sweep notebook 08 runs live.
* ``doctor``: the participants' pre-flight check (``python -m course_tools.doctor``).
* ``cgroups``: memory and task limits on a whole process tree, for the grader's sandbox (and the hub).

The rest is the instructor's and maintainer's alone:

* ``recall``: the recall study's command (``python -m course_tools.recall``).
* ``workshop``: the instructor's kit (lesson metadata, schedules, guide, measure, slides, release,
  and the one-server hub: ``room``, ``hub``).
* ``exercise_builder``: ``exercises/`` generated from ``solutions/`` (``make exercises``).
"""
