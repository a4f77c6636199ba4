"""The instructor's and maintainer's tools, kept out of ``course_lib`` (what a learner reads and imports).

``course_tools`` imports ``course_lib``; ``course_lib`` never imports ``course_tools``
(``tests/test_packages.py`` walks the imports). ``make release`` leaves this package out of the
student copy. So far it holds:

* ``workshop``: the instructor's kit (lesson metadata, schedules, guide, measure, slides, release,
  and the one-server hub: ``room``, ``hub``).
* ``exercise_builder``: ``exercises/`` generated from ``solutions/`` (``make exercises``).
"""
