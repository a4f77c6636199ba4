"""course_tools.workshop: lesson metadata in every notebook, the schedules' minutes, the generated guide."""

import json
import re
import shutil
from pathlib import Path

import pytest

from course_tools.workshop import course_map, guide, lessons, schedules
from course_tools.workshop.__main__ import main

ROOT = Path(__file__).resolve().parents[1]


def test_every_notebook_carries_complete_lesson_metadata():
    assert lessons.problems(ROOT) == []


def test_an_exercise_without_stated_minutes_is_reported(course_copy):
    path = course_copy / "exercises" / "ex07_rope.ipynb"
    notebook = json.loads(path.read_text())
    notebook["metadata"]["course_lib"].pop("minutes")
    path.write_text(json.dumps(notebook))
    found = lessons.problems(course_copy)
    assert "exercises/ex07_rope.ipynb: 'course_lib.minutes' must be a positive whole number, got 0" in found
    assert lessons.load_lessons(course_copy)["07_order_of_dishes"].exercise_minutes == 0


@pytest.mark.parametrize("leads, expected", [
    (None, "exercises/ex07_rope.ipynb: 'course_lib.lessons' must list the notebooks it follows, got None"),
    ([], "exercises/ex07_rope.ipynb: 'course_lib.lessons' must list the notebooks it follows, got []"),
    (["07_missing"], "exercises/ex07_rope.ipynb: lesson '07_missing' is not a notebook"),
])
def test_an_exercise_names_the_lessons_it_follows(course_copy, leads, expected):
    path = course_copy / "exercises" / "ex07_rope.ipynb"
    notebook = json.loads(path.read_text())
    notebook["metadata"]["course_lib"]["lessons"] = leads
    path.write_text(json.dumps(notebook))
    assert expected in lessons.problems(course_copy)


def test_a_lesson_gets_its_exercises_and_their_minutes_from_the_exercises():
    """The link is stated once, by the exercise (course_lib.lessons): a new exercise leaves the lessons alone."""
    known = lessons.load_lessons(ROOT)
    assert known["05_the_ledger"].exercises == ("ex05_causal_linear_attention", "ex06_chunked_causal")
    assert known["05b_plain_python_reference"].exercises == ("ex05_causal_linear_attention",)
    stated = lessons.exercise_minutes(ROOT)
    assert known["05_the_ledger"].exercise_minutes == stated["ex05_causal_linear_attention"] + stated["ex06_chunked_causal"]
    assert known["09_five_misconceptions"].exercises == () and known["09_five_misconceptions"].exercise_minutes == 0


def test_teaching_minutes_follow_the_stated_rule():
    assert lessons.teaching_minutes(30, 1200, 10, 3) == 21  # 0.5 + 8 + 7.5 + 4.5 = 20.5, rounded up
    assert lessons.teaching_minutes(60, 0, 0, 0) == 1


def test_display_equations_are_counted_and_left_out_of_the_words(tmp_path):
    notebook = {"metadata": {}, "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# 99 · T\n", "one two $x$ three\n", "$$a = b + c$$\n"]},
        {"cell_type": "markdown", "metadata": {}, "source": ["\\begin{align} x &= y \\\\ z &= w \\end{align} four"]},
        {"cell_type": "markdown", "metadata": {"tags": ["course-header"]}, "source": ["badge words $$ignored$$"]},
        {"cell_type": "code", "metadata": {}, "source": ["print(1)"], "outputs": [], "execution_count": None}]}
    path = tmp_path / "99_t.ipynb"
    path.write_text(json.dumps(notebook))
    lesson = lessons.read_lesson(path)
    assert (lesson.equations, lesson.words, lesson.code_cells) == (2, 9, 1)  # 4 + 4 + 1 words: no maths, no header


@pytest.fixture
def course_copy(tmp_path):
    """A copy of the notebooks and exercises whose metadata a test may break."""
    for folder in ("notebooks", "exercises"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    return tmp_path


def rewrite(root: Path, stem: str, change) -> None:
    path = root / "notebooks" / f"{stem}.ipynb"
    notebook = json.loads(path.read_text())
    change(notebook["metadata"])
    path.write_text(json.dumps(notebook))


@pytest.mark.parametrize("change, expected", [
    (lambda meta: meta.pop("course"), "05_the_ledger: no 'course' block"),
    (lambda meta: meta["course"].update(prerequisites=["04_missing"]), "prerequisite '04_missing' is not a notebook"),
    (lambda meta: meta["course"].update(keypoints=[]), "'keypoints' is empty"),
    (lambda meta: meta["course"].update(interview=["Q11"]), "interview id 'Q11'"),
    (lambda meta: meta["course"].update(teaching_minutes=1), "teaching_minutes is 1, the rule gives"),
    (lambda meta: meta["course"].pop("run_seconds"), "'run_seconds' (> 0) and 'measured_on'"),
], ids=["no block", "prerequisite", "empty keypoints", "interview id", "minutes",
        "not measured"])
def test_broken_metadata_is_reported_by_name(course_copy, change, expected):
    rewrite(course_copy, "05_the_ledger", change)
    found = lessons.problems(course_copy)
    assert any(expected in line and line.startswith("05_the_ledger") for line in found), found


@pytest.mark.parametrize("plan", schedules.PLANS, ids=[plan.name for plan in schedules.PLANS])
def test_every_schedule_adds_up_to_its_days(plan):
    known, exercises = lessons.load_lessons(ROOT), lessons.exercise_minutes(ROOT)
    rows = schedules.build(plan, known, exercises)
    for day in range(1, len(plan.days) + 1):
        today = [row for row in rows if row.day == day]
        assert sum(row.minutes for row in today) == plan.minutes_per_day
        assert today[0].start == plan.start and all(row.minutes > 0 for row in today)
        clock = [int(row.start[:2]) * 60 + int(row.start[3:]) for row in today]
        assert all(b - a == row.minutes for a, b, row in zip(clock, clock[1:], today))
    for row in rows:
        if row.kind in ("lesson", "exercise"):
            assert row.minutes == (known[row.what].teaching_minutes if row.kind == "lesson" else exercises[row.what])


@pytest.mark.parametrize("plan", schedules.PLANS, ids=[plan.name for plan in schedules.PLANS])
def test_practice_follows_teaching_in_every_plan(plan):
    assert not schedules.misplaced_exercises(plan, lessons.load_lessons(ROOT))
    assert plan.days[0][0].kind == "opening"


def test_a_laptop_room_opens_with_at_least_25_minutes():
    assert schedules.OPENING.minutes >= 25, "the set-up check and its fixes, in a room of laptops"


def test_the_rule_catches_a_lesson_without_its_exercise_and_an_exercise_out_of_place():
    known = lessons.load_lessons(ROOT)
    old_full_day = schedules.Plan("old full day", minutes_per_day=480, days=((  # the plan before issue 26
        schedules.OPENING, schedules.lesson("03_kernel_trick"), schedules.lesson("04_two_blackboards"),
        schedules.exercise("ex01_softmax_attention")),))
    assert schedules.misplaced_exercises(old_full_day, known) == [
        "old full day, day 1: 03_kernel_trick is not followed by its exercise (ex03_positive_random_features)",
        "old full day, day 1: ex01_softmax_attention does not come right after its lesson"]
    excused = schedules.Plan("excused", minutes_per_day=480, days=old_full_day.days,
                             exercise_later=(("03_kernel_trick", "homework"),))
    assert len(schedules.misplaced_exercises(excused, known)) == 1


def test_a_plan_that_does_not_fit_its_day_is_refused():
    known = lessons.load_lessons(ROOT)
    crowded = schedules.Plan("crowded", minutes_per_day=60, days=((schedules.lesson("08_when_it_pays"),
                                                                  schedules.OPENING),))
    with pytest.raises(ValueError, match="crowded, day 1: the blocks need"):
        schedules.build(crowded, known, lessons.exercise_minutes(ROOT))


def test_the_committed_guide_is_the_generated_one():
    committed = (ROOT / guide.GUIDE).read_text(encoding="utf-8")
    assert committed == guide.render(ROOT), "docs/instructor_guide.md is stale: run python -m course_tools.workshop guide"


def test_the_guide_names_every_exercise_mistake_and_interview_question():
    text = guide.render(ROOT)
    mutants = guide.load_mutants(ROOT)
    known = lessons.load_lessons(ROOT)
    linked = {exercise for lesson in known.values() for exercise in lesson.exercises}
    assert set(mutants) <= linked  # every graded exercise is reached from a lesson
    for exercise_id in linked:
        for mutant in mutants.get(exercise_id, []):
            assert mutant.mistake in text, (exercise_id, mutant.name)
    prompts = guide.interview_prompts(ROOT)
    assert sorted(prompts) == sorted(lessons.INTERVIEW_IDS)
    assert all(prompt in text for prompt in prompts.values())


def test_guide_check_fails_on_a_stale_guide(tmp_path, monkeypatch, capsys):
    for folder in ("notebooks", "exercises", "solutions", "tests"):  # the mutants read the quiz key
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "docs").mkdir()
    (tmp_path / guide.GUIDE).write_text("# an old guide\n")
    (tmp_path / "README.md").write_text(f"# A README\n{course_map.START}\nan old map\n{course_map.END}\n")
    monkeypatch.chdir(tmp_path)
    assert main(["guide", "--check"]) == 1 and "stale" in capsys.readouterr().out
    assert main(["guide"]) == 0 and main(["guide", "--check"]) == 0


def test_the_student_copy_has_the_course_and_nothing_of_the_solutions(tmp_path):
    import zipfile

    from course_tools.workshop import release

    folder, archive = release.build(ROOT, tmp_path / "student")
    names = {path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()}
    assert {"README.md", "Makefile", "pyproject.toml", "course_lib/__init__.py", "course_lib/results/bench_cpu.json",
            "notebooks/05_the_ledger.ipynb", "exercises/ex01_softmax_attention.ipynb"} <= names
    assert not any(name.startswith(("solutions/", ".venv/")) or name.endswith("quiz_key.json") for name in names)
    # of tests/ only the sanitizer pyproject's addopts name and the copy's own test (no graders, no mutants:
    # they spell out answers); of docs/ only the learner's pages
    assert {name for name in names if name.startswith("tests/")} == {"tests/nbval_sanitize.cfg",
                                                                      "tests/test_student_copy.py"}
    assert {name for name in names if name.startswith("docs/")} == set(release.LEARNER_DOCS)
    assert release.leaks(folder, ROOT) == [] and release.dead_links(folder) == []
    with zipfile.ZipFile(archive) as packed:
        assert {name.removeprefix("student/") for name in packed.namelist() if not name.endswith("/")} == names


def test_the_student_copy_has_its_own_readme_and_the_learners_targets(tmp_path):
    from course_tools.workshop import release

    folder, _ = release.build(ROOT, tmp_path / "student")
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert course_map.render(ROOT) in readme and "{map}" not in readme  # the map, with its total time
    assert "solutions/" not in readme and "make test" in readme and "check(" in readme and "hand in" in readme
    assert readme != (ROOT / "README.md").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][a-z-]*):", (folder / "Makefile").read_text(encoding="utf-8"), re.M))
    assert targets == {"test", "clean"}  # plus make/course.mk's set-up rules, shared with the repository
    shared = set(re.findall(r"^([a-z][a-z-]*):", (folder / "make" / "course.mk").read_text(encoding="utf-8"), re.M))
    assert shared == {"install", "install-dev", "lab", "kernel"}
    assert (folder / "make" / "course.mk").read_bytes() == (ROOT / "make" / "course.mk").read_bytes()


def test_a_dead_link_in_the_copy_is_found(tmp_path):
    from course_tools.workshop import release

    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("[map](docs/map.md) [web](https://example.org) [here](#top)")
    (tmp_path / "docs" / "map.md").write_text("[answers](../solutions/ex01.ipynb) [back](../README.md#top)")
    notebook = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": ["see [grading](../docs/grading.md)"]},
                          {"cell_type": "code", "metadata": {}, "source": ["# [not a link](nowhere.md)"]}]}
    (tmp_path / "n").mkdir()
    (tmp_path / "n" / "lesson.ipynb").write_text(json.dumps(notebook))
    assert release.dead_links(tmp_path) == ["docs/map.md: ../solutions/ex01.ipynb", "n/lesson.ipynb: ../docs/grading.md"]


def test_a_leaked_solution_is_found(tmp_path):
    from course_tools.workshop import release

    (tmp_path / "exercises").mkdir()
    shutil.copy(ROOT / "solutions" / "ex01_softmax_attention.ipynb", tmp_path / "exercises" / "copied.ipynb")
    (tmp_path / "notes.ipynb").write_text('{"cells": [{"source": "# BEGIN SOLUTION: x"}]}')
    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "quiz_key.json").write_text("{}")
    found = "\n".join(release.leaks(tmp_path, ROOT))
    assert "exercises/copied.ipynb: the same bytes as solutions/ex01_softmax_attention.ipynb" in found
    assert "notes.ipynb: holds a '# BEGIN SOLUTION' region" in found
    assert "solutions/quiz_key.json: a file under solutions/" in found


def test_doctor_passes_here_and_names_what_to_fix(monkeypatch, capsys):
    from course_tools import doctor

    assert doctor.run() == 0
    out = capsys.readouterr().out
    assert "ok  device: " in out and "smoke run: causal linear attention = oracle" in out and "all good" in out
    monkeypatch.setattr(doctor.importlib.metadata, "version",
                        lambda name: "0.1" if name == "torch" else importlib_version(name))
    assert doctor.run() == 1
    out = capsys.readouterr().out
    assert "FIX torch 0.1 (needs >=2.2)" in out and "- upgrade it: pip install 'torch>=2.2'" in out


def importlib_version(name: str) -> str:
    import importlib.metadata

    return importlib.metadata.distribution(name).version


def test_binder_builds_from_environment_yml_alone():
    """repo2docker picks the first configuration it finds: binder/ or .binder/ first, then these files.
    Only environment.yml must be there, with the course installed from the repository and the widgets."""
    import yaml

    competing = ["binder", ".binder", "requirements.txt", "Pipfile", "Pipfile.lock", "setup.py", "Project.toml",
                 "install.R", "apt.txt", "postBuild", "start", "runtime.txt", "Dockerfile"]
    assert [name for name in competing if (ROOT / name).exists()] == []
    entries = yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
    names = {entry.split(">")[0].split("=")[0] for entry in entries if isinstance(entry, str)}
    assert {"python", "pip", "jupyterlab", "ipykernel", "ipywidgets", "pytorch"} <= names
    assert [entry["pip"] for entry in entries if isinstance(entry, dict)] == [["-e ."]]  # a local requirement
    assert "make release" in (ROOT / "docs" / "setup.md").read_text()


def test_the_slide_rule_marks_headings_derivations_plots_and_verdicts():
    import nbformat

    from course_tools.workshop import slides

    cells = [nbformat.v4.new_markdown_cell("# 05 · Title"), nbformat.v4.new_markdown_cell("plain prose"),
             nbformat.v4.new_markdown_cell("## 2 · A section"), nbformat.v4.new_markdown_cell("so $$a = b$$ follows"),
             nbformat.v4.new_code_cell("plt.show()", outputs=[nbformat.v4.new_output(
                 "display_data", data={"image/png": "iVBOR", "text/plain": "<Figure>"})]),
             nbformat.v4.new_markdown_cell("**The verdict.** It holds."), nbformat.v4.new_code_cell("x = 1"),
             nbformat.v4.new_markdown_cell("<details>answers</details>"), nbformat.v4.new_markdown_cell("### kept")]
    cells[7].metadata["tags"] = ["interview-answers"]
    cells[8].metadata["slideshow"] = {"slide_type": "fragment"}  # an author's choice stays
    notebook = nbformat.v4.new_notebook(cells=cells)
    assert slides.tag(notebook) == 8
    kinds = [cell.metadata["slideshow"]["slide_type"] for cell in notebook.cells]
    assert kinds == ["slide", "-", "slide", "subslide", "subslide", "subslide", "-", "skip", "fragment"]


def test_every_notebook_cell_has_a_slide_type():
    import nbformat

    valid = {"slide", "subslide", "fragment", "-", "skip", "notes"}
    for path in lessons.notebook_paths(ROOT):
        notebook = nbformat.read(path, as_version=4)
        kinds = [cell.metadata.get("slideshow", {}).get("slide_type") for cell in notebook.cells]
        assert set(kinds) <= valid, f"{path.name}: run python -m course_tools.workshop slides --tag"
        shown = [kind for kind in kinds if kind != "skip"]  # the header cells (badges, Colab set-up) are skipped
        assert shown[0] == "slide", path.name


def test_a_deck_loads_every_script_from_the_local_vendor_folder(tmp_path):
    import re

    from course_tools.workshop import slides

    for name in slides.VENDOR:  # the packages' folders, as npm leaves them (the build only links to them)
        (tmp_path / "vendor" / "node_modules" / name).mkdir(parents=True)
    (deck,) = slides.build([ROOT / "notebooks" / "05_the_ledger.ipynb"], tmp_path)
    html = deck.read_text()
    remote = re.findall(r'<script[^>]+src="(https?://[^"]+)"|<link[^>]+href="(https?://[^"]+)"', html)
    assert remote == [], remote
    # inline scripts too: nbconvert's template imports mermaid from a CDN inside a module script
    inline = [re.findall(r'(?:https?:)?//[\w.-]+\.[a-z]{2,}/[^\s\'"`)]*', body)
              for body in re.findall(r"<script[^>]*>(.*?)</script>", html, flags=re.S)]
    imported = [url for urls in inline for url in urls if "github.com/hakimel/reveal.js" not in url]  # a comment's link
    assert imported == [], imported
    for name in ("reveal.js/dist/reveal.js", "requirejs/require.js", "mathjax/MathJax.js", "jquery/dist/jquery.min.js"):
        assert f"vendor/node_modules/{name}" in html, name
    assert html.count('class="slides"') == 1 and "<section" in html
