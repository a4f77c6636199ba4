"""The workshop room's pure parts (course_tools.workshop.room), on any machine: the participants file,
the settings the hub reads from WORKSHOP_*, each user's private copy, and the cgroup limits
(written into a stand-in for /sys/fs/cgroup). tests/test_hub.py runs them inside a real hub."""

import os
from pathlib import Path

import pytest

from course_tools.workshop import room

PROC_CGROUP = "4:memory:/process_api/abc\n2:cpu,cpuacct:/\n0::/\n"


def participants_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "participants.txt"
    path.write_text(text)
    return path


def test_participants_are_read_with_admins_comments_and_blank_lines(tmp_path):
    path = participants_file(tmp_path, "# instructors first\nlead admin\n\nalice\nbob   # late\n")
    assert room.read_participants(path) == (room.Participant("lead", admin=True), room.Participant("alice"),
                                            room.Participant("bob"))


@pytest.mark.parametrize("text, complaint", [
    ("Alice\n", "line 1: 'Alice' is not a Unix user name"),
    ("alice\nalice\n", "line 2: 'alice' is listed twice"),
    ("lead instructor\n", "line 1: expected 'name' or 'name admin'"),
    ("# nobody yet\n", "lists no participants"),
    ("a" * 33 + "\n", "is not a Unix user name"),
])
def test_a_bad_participants_file_names_the_line_and_what_was_expected(tmp_path, text, complaint):
    with pytest.raises(ValueError, match=complaint):
        room.read_participants(participants_file(tmp_path, text))


@pytest.mark.parametrize("text, expected", [("4G", 4 * 2**30), ("512M", 512 * 2**20), ("1.5GiB", 3 * 2**29),
                                            ("2048", 2048), ("64kb", 64 * 2**10)])
def test_sizes_are_read_in_binary_units(text, expected):
    assert room.parse_size(text, name="WORKSHOP_MEM_LIMIT") == expected


@pytest.mark.parametrize("text", ["", "lots", "0G", "-1G", "4 P"])
def test_a_bad_size_names_the_variable(text):
    with pytest.raises(ValueError, match="WORKSHOP_MEM_LIMIT must be a positive size"):
        room.parse_size(text, name="WORKSHOP_MEM_LIMIT")


def environment(tmp_path: Path, **extra: str) -> dict:
    return {"WORKSHOP_PREFIX": str(tmp_path / "srv"), "WORKSHOP_STATE": str(tmp_path / "state"),
            "WORKSHOP_PARTICIPANTS": str(participants_file(tmp_path, "lead admin\nalice\n")), **extra}


def test_settings_come_from_the_environment_with_stated_defaults(tmp_path):
    settings = room.RoomSettings.from_env(environment(tmp_path, WORKSHOP_MEM_LIMIT="2G", WORKSHOP_PORT="8123"))
    assert settings.mem_limit == 2 * 2**30 and settings.port == 8123
    assert (settings.ip, settings.cpu_limit, settings.idle_timeout, settings.api_token) == ("127.0.0.1", 1.0, 3600, None)
    assert [person.name for person in settings.participants] == ["lead", "alice"]


@pytest.mark.parametrize("change, complaint", [
    ({"WORKSHOP_STATE": ""}, "set WORKSHOP_STATE"),
    ({"WORKSHOP_PARTICIPANTS": "/nonexistent/list.txt"}, "WORKSHOP_PARTICIPANTS must be a file"),
    ({"WORKSHOP_CPU_LIMIT": "half"}, "WORKSHOP_CPU_LIMIT must be a positive float, got 'half'"),
    ({"WORKSHOP_CPU_LIMIT": "0"}, "WORKSHOP_CPU_LIMIT must be a positive float"),
    ({"WORKSHOP_PORT": "80.5"}, "WORKSHOP_PORT must be a positive int"),
    ({"WORKSHOP_IDLE_TIMEOUT": "-5"}, "WORKSHOP_IDLE_TIMEOUT must be a positive int"),
])
def test_bad_settings_name_the_variable(tmp_path, change, complaint):
    with pytest.raises(ValueError, match=complaint):
        room.RoomSettings.from_env({**environment(tmp_path), **change})


def test_the_course_copy_is_private_owned_and_made_only_once(tmp_path):
    course, home = tmp_path / "course", tmp_path / "home"
    (course / "notebooks").mkdir(parents=True)
    (course / "notebooks" / "00.ipynb").write_text("{}")
    home.mkdir(mode=0o755)
    copy = room.give_course_copy(home, course, os.getuid(), os.getgid())
    assert home.stat().st_mode & 0o777 == 0o700
    assert (copy / "notebooks" / "00.ipynb").read_text() == "{}"
    (copy / "notebooks" / "00.ipynb").write_text("the participant's work")
    room.give_course_copy(home, course, os.getuid(), os.getgid())
    assert (copy / "notebooks" / "00.ipynb").read_text() == "the participant's work"


def test_own_cgroup_reads_v1_lines_and_comma_joined_controllers():
    assert room.own_cgroup("memory", PROC_CGROUP) == "/process_api/abc"
    assert room.own_cgroup("cpu", PROC_CGROUP) == "/"
    with pytest.raises(KeyError):
        room.own_cgroup("pids", PROC_CGROUP)


def fake_cgroupfs(tmp_path: Path, *, swap_accounting: bool) -> Path:
    root = tmp_path / "cgroup"
    (root / "memory" / "process_api" / "abc").mkdir(parents=True)
    (root / "cpu").mkdir()
    if swap_accounting:  # the kernel creates these files in every new group; a plain folder does not
        group = root / "memory" / "process_api" / "abc" / room.CGROUP_GROUP / "alice"
        group.mkdir(parents=True)
        (group / "memory.memsw.limit_in_bytes").write_text("max")
    return root


@pytest.mark.parametrize("swap_accounting", [False, True])
def test_limits_nest_under_the_hubs_own_cgroups(tmp_path, swap_accounting):
    root = fake_cgroupfs(tmp_path, swap_accounting=swap_accounting)
    memory, cpu = room.prepare_limits("alice", memory_bytes=2**31, cpus=1.5, root=root, proc_cgroup=PROC_CGROUP)
    assert memory == root / "memory/process_api/abc" / room.CGROUP_GROUP / "alice"
    assert cpu == root / "cpu" / room.CGROUP_GROUP / "alice"
    assert (memory / "memory.limit_in_bytes").read_text() == str(2**31)
    assert (memory / "memory.memsw.limit_in_bytes").exists() == swap_accounting
    if swap_accounting:
        assert (memory / "memory.memsw.limit_in_bytes").read_text() == str(2**31)
    assert (cpu / "cpu.cfs_quota_us").read_text() == "150000"
    assert (cpu / "cpu.cfs_period_us").read_text() == str(room.CPU_PERIOD_US)
    room.join((memory, cpu))
    assert (memory / "cgroup.procs").read_text() == (cpu / "cgroup.procs").read_text() == "0"


def test_limits_say_why_they_cannot_be_set(tmp_path):
    with pytest.raises(room.LimitsUnavailable, match="no cgroup v1 'memory' controller"):
        room.prepare_limits("alice", memory_bytes=2**31, cpus=1, root=tmp_path, proc_cgroup="0::/\n")
    (tmp_path / "memory").write_text("not a folder")
    with pytest.raises(room.LimitsUnavailable, match="cannot set cgroup limits"):
        room.prepare_limits("alice", memory_bytes=2**31, cpus=1, root=tmp_path, proc_cgroup=PROC_CGROUP)
