"""course_lib.quiz, notebook 10's self-check: the key file, no key in student files, rendering, links.

The plaintext key lives in solutions/quiz_key.json (instructor side); these tests
read it to know the right answers, and check that no student-visible file shows them.
The graded quiz, exercise ex08, is tests/test_quiz_bank.py's.
"""

import html
import itertools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_lib.quiz import QUESTIONS, Quiz, question, show
from course_lib.quiz import links, render
from course_lib.quiz.questions import canonical_answer
from course_lib.quiz.key import KeyEntry, load_key
from course_lib.quiz.session import NO_KEY
from course_lib.quiz.widget import QuestionWidget
from course_tools.workshop.release import INCLUDED

ROOT = Path(__file__).resolve().parents[1]
KEY_FILE = ROOT / "solutions" / "quiz_key.json"
KEY = json.loads(KEY_FILE.read_text(encoding="utf-8"))
ANSWERS = {qid: entry["answer"] for qid, entry in KEY.items()}
EXERCISE = "ex08_interview_quiz"


# --- answers and the key file -------------------------------------------------------------------


@pytest.mark.parametrize("answer", ["ABD", "DBA", "a, b d", {"A", "B", "D"}, ["d", "a", "b"], "ABDA"])
def test_canonical_answer_ignores_order_case_separators_and_repeats(answer):
    assert canonical_answer(answer, letters="ABCD", multiple=True) == "ABD"


@pytest.mark.parametrize(
    ("answer", "multiple", "message"),
    [
        ("E", True, "answer must use the options A, B, C, D; got 'E'"),
        ({"AB"}, True, "got 'AB'"),
        ("", True, "answer is empty"),
        (" , ", False, "answer is empty"),
        ("AB", False, "answer must be one letter (single choice), got 'AB'"),
        (3, False, "answer must be a string of letters or a set of letters, got int"),
    ],
)
def test_malformed_answers_raise_naming_the_problem(answer, multiple, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        canonical_answer(answer, letters="ABCD", multiple=multiple)


def test_question_errors_name_the_question():
    with pytest.raises(ValueError, match=r"^Q1: answer must be one letter"):
        question("Q1").canonical("AB")
    with pytest.raises(ValueError, match="unknown question id 'Q11'; known: Q1, Q2"):
        question("Q11")


def test_the_key_file_gives_every_question_its_canonical_answer_and_explanation():
    key = load_key()
    assert sorted(key) == sorted(q.id for q in QUESTIONS)
    for q in QUESTIONS:
        assert key[q.id] == KeyEntry(q.canonical(KEY[q.id]["answer"]), KEY[q.id]["explanation"])
        assert "notebooks/" in key[q.id].explanation  # each explanation points to a notebook


def test_a_bad_key_file_is_refused_and_a_missing_one_is_none(tmp_path):
    assert load_key(tmp_path / "absent.json") is None
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"Q1": KEY["Q1"]}), encoding="utf-8")
    with pytest.raises(ValueError, match="the key must answer exactly Q1, Q2"):
        load_key(partial)
    two_letters = tmp_path / "two.json"
    two_letters.write_text(json.dumps({**KEY, "Q1": {**KEY["Q1"], "answer": "BC"}}), encoding="utf-8")
    with pytest.raises(ValueError, match="^Q1: answer must be one letter"):
        load_key(two_letters)
    silent = tmp_path / "silent.json"
    silent.write_text(json.dumps({**KEY, "Q2": {**KEY["Q2"], "explanation": " "}}), encoding="utf-8")
    with pytest.raises(ValueError, match="Q2 has no explanation"):
        load_key(silent)


# --- the key is not readable from the student files ------------------------------------------


def _strings(node) -> list[str]:
    """Every string in a parsed JSON document (a notebook's sources and outputs)."""
    if isinstance(node, str):
        return [node]
    items = node.values() if isinstance(node, dict) else node if isinstance(node, list) else []
    return [text for item in items for text in _strings(item)]


def _student_texts() -> dict[str, str]:
    """The text files of the student copy: the files and folders ``make release`` ships (``INCLUDED``)."""
    texts = {}
    for entry in INCLUDED:
        for path in sorted((ROOT / entry).rglob("*")) if (ROOT / entry).is_dir() else [ROOT / entry]:
            if ".ipynb_checkpoints" in path.parts or "__pycache__" in path.parts or not path.is_file():
                continue
            if path.suffix == ".ipynb":
                texts[str(path.relative_to(ROOT))] = "\n".join(_strings(json.loads(path.read_text(encoding="utf-8"))))
            elif path.suffix in (".py", ".md", ".txt", ".json"):
                texts[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
    return texts


def test_student_files_include_the_quiz_files():
    texts = _student_texts()
    quiz_files = ["notebooks/10_interview_quiz.ipynb", "exercises/ex08_interview_quiz.ipynb"]
    for name in [*quiz_files, "course_lib/quiz/key.py", "course_tools/grading/exercises/ex08_interview_quiz.py"]:
        assert name in texts, f"{name} is not scanned"


def test_no_explanation_sentence_appears_in_student_files():
    sentences = [
        sentence
        for entry in KEY.values()
        for sentence in re.split(r"(?<=[.;])\s+", entry["explanation"])
        if len(sentence) >= 40 and not sentence.startswith("See ")
    ]
    assert len(sentences) >= 30
    for name, text in _student_texts().items():
        leaked = [s for s in sentences if s in text]
        assert not leaked, f"{name} shows the explanation sentence {leaked[0]!r}"


def test_no_answer_key_appears_in_student_files():
    patterns = [
        re.compile(rf"\b{qid}\b[\"']?\s*[:=,]\s*[\"']?{''.join(order)}\b")
        for qid, answer in ANSWERS.items()
        for order in itertools.permutations(answer)
    ]
    assert patterns[0].search('"Q1": "B"') and patterns[0].search("Q1 = B")  # the patterns do find a key
    for name, text in _student_texts().items():
        for pattern in patterns:
            assert not pattern.search(text), f"{name} shows the key: {pattern.search(text).group()!r}"


def test_exercise_notebook_has_no_model_answers():
    text = "\n".join(_strings(json.loads((ROOT / "exercises" / f"{EXERCISE}.ipynb").read_text(encoding="utf-8"))))
    solution = nbformat.read(ROOT / "solutions" / f"{EXERCISE}.ipynb", as_version=4)
    model_cells = [c for c in solution.cells if "solution-only" in c.metadata.get("tags", [])]
    assert len(model_cells) >= 4 and all(c.source not in text for c in model_cells)
    assert text.count("**Your answer:**") == 3 and "Model answer" not in text


# --- the session and rendering -----------------------------------------------------------------


def test_quiz_records_the_latest_answer_and_explains_every_answer():
    quiz = Quiz()
    wrong = "A" if ANSWERS["Q1"] != "A" else "C"
    first = quiz.answer("Q1", wrong.lower())
    assert (first.correct, first.answer, first.key) == (False, wrong, ANSWERS["Q1"])
    assert first.explanation == KEY["Q1"]["explanation"] and f"the key is {ANSWERS['Q1']}" in first.text()
    second = quiz.answer("Q1", ANSWERS["Q1"])
    assert second.correct and str(second).startswith(f"Q1: {ANSWERS['Q1']} is correct.")
    assert quiz.answers == {"Q1": ANSWERS["Q1"]}
    with pytest.raises(ValueError, match="^Q2: answer must use the options"):
        quiz.answer("Q2", "Z")
    with pytest.raises(ValueError, match="question_id must be one of Q1, Q2"):
        quiz.answer("Q0", "A")
    assert "Q2" not in quiz.answers  # a malformed answer is not recorded


def test_a_copy_without_the_key_records_answers_and_says_who_grades_them(tmp_path):
    quiz = Quiz(key_path=tmp_path / "absent.json")
    feedback = quiz.answer("Q1", "a")
    assert (feedback.correct, feedback.key, quiz.answers) == (None, None, {"Q1": "A"})
    assert feedback.text() == f"Q1: A recorded.\n{NO_KEY}" and "your instructor has the key" in NO_KEY


def test_installed_without_a_clone_the_quiz_records_answers_and_links_to_the_repository(tmp_path):
    # a plain pip install copies course_lib alone into site-packages: no clone, no key, no notebooks
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    shutil.copytree(ROOT / "course_lib", site / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    probe = (
        "from course_lib.quiz import Quiz, clone, key, links\n"
        "print(clone.CLONE, key.KEY_PATH, links.NOTEBOOKS)\n"
        "print(Quiz().answer('Q1', 'A'))\n"
        "links.repository_url = lambda: 'https://example.org/course'\n"
        "print(links.to_markdown('See notebooks/05_the_ledger.ipynb.'))\n"
        "links.repository_url = lambda: None\n"
        "print(links.to_markdown('See notebooks/05_the_ledger.ipynb.'))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env={"PYTHONPATH": str(site)},
                          capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == [
        "None None None",
        "Q1: A recorded.",
        NO_KEY,
        "See [notebooks/05_the_ledger.ipynb](https://example.org/course/blob/main/notebooks/05_the_ledger.ipynb).",
        "See notebooks/05_the_ledger.ipynb.",
    ]


def test_the_clone_is_found_only_beside_the_course_pyproject(tmp_path):
    from course_lib.quiz.clone import clone_root

    assert clone_root() == ROOT
    module = tmp_path / "course_lib" / "quiz" / "clone.py"
    module.parent.mkdir(parents=True)
    assert clone_root(module) is None
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "someone_else"\n')
    assert clone_root(module) is None


def test_text_mode_prints_every_question_and_how_to_answer(capsys):
    assert not render.in_kernel()
    quiz = show()  # auto: no kernel here, so text
    out = capsys.readouterr().out
    for q in QUESTIONS:
        assert q.text() in out
    assert "  A. O(N·d)" in out and 'quiz.answer("Q1", "A")' in out
    assert quiz.answers == {}


def test_show_in_widget_mode_displays_one_widget_per_question(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    quiz = show(mode="widget")
    assert [w.question.id for w in shown] == [q.id for q in QUESTIONS]
    assert all(isinstance(w, QuestionWidget) and w.quiz is quiz for w in shown)
    with pytest.raises(ValueError, match="mode must be one of auto, widget, text, got 'html'"):
        show(mode="html")


def test_widget_single_choice_check_gives_feedback_and_reveals_the_explanation():
    q, quiz = question("Q1"), Quiz()
    widget = QuestionWidget(q, quiz)
    widget.button.click()
    assert "Pick an option first" in widget.feedback.value and quiz.answers == {}
    wrong = next(letter for letter in q.letters if letter != ANSWERS["Q1"])
    widget.select(wrong)
    widget.button.click()
    assert quiz.answers == {"Q1": wrong}
    assert "firebrick" in widget.feedback.value and f"{wrong} is not correct" in widget.feedback.value
    assert html.escape(KEY["Q1"]["explanation"].split(". ")[1]) in widget.feedback.value
    widget.select(ANSWERS["Q1"])
    widget.button.click()
    assert "green" in widget.feedback.value and quiz.answers == {"Q1": ANSWERS["Q1"]}


def test_widget_multiple_choice_uses_check_boxes():
    q, quiz = question("Q2"), Quiz()
    widget = QuestionWidget(q, quiz)
    assert len(widget.choices) == 4
    widget.choices[q.letters.index(ANSWERS["Q2"][-1])].value = True
    widget.choices[q.letters.index(ANSWERS["Q2"][0])].value = True
    assert widget.selected() == "".join(sorted({ANSWERS["Q2"][0], ANSWERS["Q2"][-1]}))
    widget.select(ANSWERS["Q2"][::-1])
    assert widget.selected() == ANSWERS["Q2"]
    widget.button.click()
    assert f"{ANSWERS['Q2']} is correct" in widget.feedback.value and quiz.answers == {"Q2": ANSWERS["Q2"]}


def test_widget_falls_back_to_the_question_text_in_static_views():
    bundle = QuestionWidget(question("Q7"), Quiz())._repr_mimebundle_()
    assert bundle["text/plain"] == question("Q7").text()
    assert "application/vnd.jupyter.widget-view+json" in bundle


# --- the explanations' pointers are links (notebook 10 promises them) -------------------------


def test_every_pointer_in_the_key_names_an_existing_notebook_and_heading():
    found = 0
    for qid, entry in KEY.items():
        for notebook, sections in links.pointers(entry["explanation"]):
            assert (ROOT / "notebooks" / notebook).is_file(), f"{qid}: notebooks/{notebook} does not exist"
            for section in sections:
                assert links.heading(section, notebook), f"{qid}: {notebook} has no section {section!r}"
                found += 1
    assert found >= 20


def test_pointers_become_html_links_in_the_widget():
    q, quiz = question("Q5"), Quiz()
    widget = QuestionWidget(q, quiz)
    widget.select(ANSWERS["Q5"])
    widget.button.click()
    hrefs = re.findall(r'<a href="([^"]+)" target="_blank">', widget.feedback.value)
    assert "05_the_ledger.ipynb" in hrefs and "08_when_it_pays.ipynb" in hrefs
    assert "05_the_ledger.ipynb#From-the-masked-matrix-to-the-recursion" in hrefs
    assert "08_when_it_pays.ipynb#6-·-Verdict-on-&quot;constant-memory-in-decoding&quot;" in hrefs
    assert "&lt;a href" not in widget.feedback.value  # the links are not escaped into text
    assert "<script" not in links.to_html('<script>x</script> notebooks/01_the_bottleneck.ipynb')


def test_pointers_become_markdown_links_and_stay_plain_in_text():
    feedback = Quiz().answer("Q7", ANSWERS["Q7"])
    md = feedback._repr_markdown_()
    assert md.startswith(f"**Q7: {ANSWERS['Q7']} is correct.**")
    assert "[notebooks/06_price_of_the_summary.ipynb](06_price_of_the_summary.ipynb)" in md
    targets = re.findall(r"\]\(([^)\s]+)\)", md)
    assert len(targets) == 3 and all(t.startswith("06_price_of_the_summary.ipynb") for t in targets)
    assert "notebooks/06_price_of_the_summary.ipynb (sections" in feedback.text()  # print(): plain text
    assert "](" not in feedback.text()


def test_links_resolve_headings_with_marks_quotes_and_maths():
    assert links.anchor("The elu + 1 kernel is *not* softmax", "02_blackboard_associativity.ipynb") == (
        "The-elu-+-1-kernel-is-not-softmax"
    )
    assert links.heading("3 · Verdict on 'the speed-up is about N/d'", "08_when_it_pays.ipynb") == (
        '3 · Verdict on "the speed-up is about $N/d$"'
    )
    assert links.heading("No such section at all", "08_when_it_pays.ipynb") is None
    assert links.split("no pointer here") == [links.Link("no pointer here")]
