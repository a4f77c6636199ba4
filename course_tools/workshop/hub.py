"""A workshop room on one server: the course's JupyterHub (``make hub``), configured by ``configure``.

Kept libraries do the work: JupyterHub (the hub, its REST API and admin panel), npm's
configurable-http-proxy, jupyterhub-firstuseauthenticator (each participant chooses a password
at first login), LocalAuthenticator's ``create_system_users`` (a Unix account per participant,
so file permissions keep people apart), LocalProcessSpawner (one single-user JupyterLab per
account) and jupyterhub-idle-culler (a hub service). Written here, in ``room``: each user's private
copy of the course and the cgroup limits that LocalProcessSpawner does not enforce. Needs the
``hub`` extra (``pip install '.[hub]'``) and root.
"""

import pwd
import sys

from firstuseauthenticator import FirstUseAuthenticator
from jupyterhub.auth import LocalAuthenticator
from jupyterhub.spawner import LocalProcessSpawner
from traitlets import Unicode

from course_tools.workshop import room

ADMIN_SERVICE = "workshop-admin"
ADMIN_SCOPES = ["admin:users", "admin:servers", "access:servers", "list:services", "read:services"]
CULLER_SCOPES = ["list:users", "read:users:activity", "read:servers", "delete:servers"]
START_PAGE = "/lab/tree/notebooks/00_start_here.ipynb"


class WorkshopAuthenticator(LocalAuthenticator, FirstUseAuthenticator):
    """First-use passwords; every user the hub knows gets a Unix account with a home only they can open."""

    def add_system_user(self, user):
        super().add_system_user(user)
        pwd_entry = pwd.getpwnam(user.name)
        room.close_home(pwd_entry.pw_dir)


class WorkshopSpawner(LocalProcessSpawner):
    """LocalProcessSpawner that first gives the user their copy of the course, then starts the server
    inside the user's cgroups (joined before root is dropped, so every kernel it starts is inside too)."""

    course = Unicode(help="the student copy each participant's own copy is made from").tag(config=True)

    async def start(self):
        account = pwd.getpwnam(self.user.name)
        room.give_course_copy(account.pw_dir, self.course, account.pw_uid, account.pw_gid)
        try:
            self.limit_folders = room.prepare_limits(self.user.name, memory_bytes=int(self.mem_limit),
                                                     cpus=float(self.cpu_limit))
            self.log.info("limits for %s: %s bytes, %s cores (cgroups %s)", self.user.name, self.mem_limit,
                          self.cpu_limit, ", ".join(map(str, self.limit_folders)))
        except room.LimitsUnavailable as reason:
            self.limit_folders = ()
            self.log.warning("NO memory/CPU limits for %s: %s", self.user.name, reason)
        return await super().start()

    def make_preexec_fn(self, name):
        drop_root = super().make_preexec_fn(name)
        folders = self.limit_folders

        def join_limits_then_drop_root():
            room.join(folders)
            drop_root()

        return join_limits_then_drop_root


def configure(c, settings: room.RoomSettings) -> None:
    """Fill the traitlets config ``c`` (a jupyterhub_config.py's) for a workshop room."""
    names = {person.name for person in settings.participants}
    c.JupyterHub.ip = settings.ip
    c.JupyterHub.port = settings.port
    c.JupyterHub.hub_ip = "127.0.0.1"
    c.JupyterHub.hub_port = settings.port + 1
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{settings.port + 2}"
    c.ConfigurableHTTPProxy.command = [str(settings.prefix / "proxy/node_modules/.bin/configurable-http-proxy")]
    c.JupyterHub.db_url = f"sqlite:///{settings.state / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(settings.state / "jupyterhub_cookie_secret")
    c.JupyterHub.pid_file = str(settings.state / "jupyterhub.pid")

    c.JupyterHub.authenticator_class = WorkshopAuthenticator
    c.LocalAuthenticator.create_system_users = True
    c.Authenticator.allowed_users = names
    c.Authenticator.admin_users = {person.name for person in settings.participants if person.admin}
    c.FirstUseAuthenticator.create_users = False  # only the listed (or API-created) users may log in
    c.FirstUseAuthenticator.dbm_path = str(settings.state / "passwords.dbm")

    c.JupyterHub.spawner_class = WorkshopSpawner
    c.WorkshopSpawner.course = str(settings.prefix / "course")
    c.Spawner.cmd = [str(settings.prefix / "venv/bin/jupyterhub-singleuser")]
    c.Spawner.notebook_dir = f"~/{room.COURSE_DIR}"
    c.Spawner.default_url = START_PAGE
    c.Spawner.mem_limit = settings.mem_limit
    c.Spawner.cpu_limit = settings.cpu_limit
    c.Spawner.start_timeout = 120
    c.Spawner.http_timeout = 120

    c.JupyterHub.services = [{"name": "idle-culler", "command": [
        sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={settings.idle_timeout}",
        f"--cull-every={max(settings.idle_timeout // 6, 10)}"]}]
    c.JupyterHub.load_roles = [{"name": "idle-culler", "scopes": CULLER_SCOPES, "services": ["idle-culler"]}]
    if settings.api_token:
        c.JupyterHub.services.append({"name": ADMIN_SERVICE, "api_token": settings.api_token})
        c.JupyterHub.load_roles.append({"name": ADMIN_SERVICE, "scopes": ADMIN_SCOPES, "services": [ADMIN_SERVICE]})
