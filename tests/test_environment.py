"""Dependencies by role: the runtime dependencies are what the notebooks and exercises import, the
``test`` and ``instructor`` extras the rest; environment.yml (conda, Binder) lists all three with
pyproject.toml's ranges."""

import ast
import sys
import tomllib
from pathlib import Path

import yaml

from test_packages import tools_reached_from_notebooks

ROOT = Path(__file__).resolve().parents[1]
CONDA_NAMES = {"pytorch": "torch"}  # conda-forge name -> PyPI name
DEVELOPER_EXTRAS = ("test", "instructor")  # environment.yml's; peers, browser and hub stay optional
DISTRIBUTION_OF = {"torch": "torch", "numpy": "numpy", "matplotlib": "matplotlib", "ipywidgets": "ipywidgets",
                   "IPython": "ipykernel", "tqdm": "tqdm", "cloudpickle": "cloudpickle"}  # import name -> PyPI name
OPTIONAL_IMPORTS = {"fla": "peers"}  # tried inside try/except ImportError; the extra that installs it


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def pyproject_requirements(*extras: str) -> dict[str, str]:
    specs = project()["dependencies"] + [spec for extra in extras for spec in project()["optional-dependencies"][extra]]
    return dict(_split(spec) for spec in specs)


def conda_requirements() -> dict[str, str]:
    entries = yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
    specs = [entry for entry in entries if isinstance(entry, str) and not entry.startswith(("python", "pip"))]
    return {CONDA_NAMES.get(name, name): version for name, version in map(_split, specs)}


def _split(spec: str) -> tuple[str, str]:
    for index, char in enumerate(spec):
        if char in "<>=!~":
            return spec[:index].strip().lower(), spec[index:].replace(" ", "")
    return spec.strip().lower(), ""


def test_environment_yml_matches_pyproject_and_its_developer_extras():
    assert conda_requirements() == pyproject_requirements(*DEVELOPER_EXTRAS)


def learner_modules() -> list[Path]:
    """course_lib, and the modules of course_tools the notebooks and exercises reach (check(), notebook 08)."""
    tools = [ROOT.joinpath(*name.split(".")) for name in tools_reached_from_notebooks()]
    return sorted(ROOT.glob("course_lib/**/*.py")) + [
        path / "__init__.py" if path.is_dir() else path.with_suffix(".py") for path in tools]


def third_party_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return {name for name in names if name not in sys.stdlib_module_names and not name.startswith("course_")}


def test_what_learners_import_is_a_runtime_dependency_and_tools_live_in_extras():
    runtime = pyproject_requirements()
    for path in learner_modules():
        for name in third_party_imports(path) - set(OPTIONAL_IMPORTS):
            assert DISTRIBUTION_OF.get(name) in runtime, (
                f"{path.relative_to(ROOT)} imports {name}: make it a runtime dependency or keep it out of learner code")
    assert not {"pytest", "hypothesis", "nbval", "nbclient", "nbformat", "pyyaml"} & set(runtime)
    assert all(extra in project()["optional-dependencies"] for extra in OPTIONAL_IMPORTS.values())


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


def test_python_floor_agrees_in_pyproject_environment_yml_and_readme():
    floor = project()["requires-python"]
    assert floor.startswith(">="), f"requires-python should be a floor, got {floor!r}"
    version = floor[2:]
    entries = yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
    pythons = [entry for entry in entries if isinstance(entry, str) and entry.startswith("python")]
    # Pinned, not a range: repo2docker (Binder) reads a range as unspecified and builds its own default.
    assert pythons == [f"python={version}"], f"environment.yml should pin python={version} (tested), has {pythons}"
    readme = (ROOT / "README.md").read_text()
    assert f"Python ≥ {version}" in readme, f"README's set-up should say Python ≥ {version}"
    assert sys.version_info >= tuple(map(int, version.split("."))), f"the tests run on {sys.version}, below {floor}"


def test_license_and_citation_agree_with_pyproject():
    license_name = project()["license"]["text"]
    assert license_name == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n"), "LICENSE should be the MIT text"
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0"
    assert citation["license"] == license_name, f"CITATION.cff says {citation['license']}, pyproject {license_name}"
    assert str(citation["version"]) == project()["version"], (
        f"CITATION.cff's version {citation['version']} is not pyproject's {project()['version']}")
