"""environment.yml (conda, Binder) lists exactly pyproject.toml's dependencies and ranges."""

import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONDA_NAMES = {"pytorch": "torch"}  # conda-forge name -> PyPI name


def pyproject_requirements() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return dict(_split(spec) for spec in project["dependencies"])


def conda_requirements() -> dict[str, str]:
    entries = yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
    specs = [entry for entry in entries if isinstance(entry, str) and not entry.startswith(("python", "pip"))]
    return {CONDA_NAMES.get(name, name): version for name, version in map(_split, specs)}


def _split(spec: str) -> tuple[str, str]:
    for index, char in enumerate(spec):
        if char in "<>=!~":
            return spec[:index].strip().lower(), spec[index:].replace(" ", "")
    return spec.strip().lower(), ""


def test_environment_yml_matches_pyproject():
    assert conda_requirements() == pyproject_requirements()


def test_every_dependency_is_a_range_not_a_pin():
    pinned = {name: version for name, version in pyproject_requirements().items() if version.startswith("==")}
    assert pinned == {}, f"pin ranges, not versions: {pinned}"


def test_environment_installs_course_lib_itself():
    entries = yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
    pip_lists = [entry["pip"] for entry in entries if isinstance(entry, dict)]
    assert pip_lists == [["-e ."]]


def test_ci_runs_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    assert "make test" in (ROOT / "README.md").read_text()
