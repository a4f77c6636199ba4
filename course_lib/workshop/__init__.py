"""The instructor's kit, generated from the notebooks themselves (issue: the workshop).

* ``lessons``: the ``course`` block in every notebook's metadata (questions, objectives, key
  points, minutes, prerequisites, exercises), read and checked;
* ``schedules``: three workshop schedules built from those minutes;
* ``guide``: ``docs/instructor_guide.md``, written from the lessons, the schedules and the
  graders' known mistakes;
* ``python -m course_lib.workshop guide | measure`` (``__main__``).
"""
