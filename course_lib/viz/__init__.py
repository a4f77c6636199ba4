"""The interactive explorer of notebook 11: standard attention's n×n matrix against linear
attention's decomposition, and what each costs.

``explore()`` shows the widgets; ``viz.panels`` holds the pure functions behind each panel.
"""

from course_lib.viz.explorer import Explorer, explore

__all__ = ["Explorer", "explore"]
