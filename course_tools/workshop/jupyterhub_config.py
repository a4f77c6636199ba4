# The workshop hub's configuration: `make hub` runs `jupyterhub -f` on this file with the WORKSHOP_*
# variables set (course_tools.workshop.room.RoomSettings lists them; docs/setup.md, "One shared server").
import os

from course_tools.workshop import hub, room

hub.configure(get_config(), room.RoomSettings.from_env(os.environ))  # noqa: F821 (get_config: jupyterhub's)
