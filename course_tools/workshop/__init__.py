"""The instructor's kit, generated from the notebooks themselves, so it cannot drift from the course.

* ``lessons``: the ``course`` block in every notebook's metadata (questions, objectives, key
  points, minutes, prerequisites, exercises), read and checked; ``measure`` re-times the notebooks;
* ``schedules``: three workshop schedules built from those minutes;
* ``guide``: ``docs/instructor_guide.md``, written from the lessons, the schedules and the graders'
  known mistakes;
* ``release``: the student copy (the participants' pre-flight check is ``course_tools.doctor``, in it); ``slides``: one
  offline reveal.js deck per notebook;
* ``room`` and ``hub``: a workshop room on one server (``make hub``): the participants, their
  private copies and limits (``room``, no JupyterHub needed) and the JupyterHub configuration
  (``hub``, the ``hub`` extra; ``jupyterhub_config.py`` is the file ``jupyterhub -f`` reads);
* the command line: ``python -m course_tools.workshop guide | measure | release | slides``.
"""
