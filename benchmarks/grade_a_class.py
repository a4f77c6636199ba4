"""A class of 30 submissions graded as a workshop would: wall time, and what the sandbox costs.

    .venv/bin/python benchmarks/grade_a_class.py > course_lib/results/grade_a_class_cpu.txt

The class (ex01 and ex11): 12 correct, 8 stubs, 4 wrong (a mutant each), 2 endless cells, 4
hostile (from tests/attacks.py); each file name holds its exercise's id, which is how the grader
tells them apart. It is graded with ``--jobs 2``, then one correct notebook is graded alone with
bubblewrap and with ``--unsafe-no-sandbox``, three times each, to price the sandbox. Without
bubblewrap the class is graded with ``--unsafe-no-sandbox`` (the grader refuses otherwise),
which the output says.
"""

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from attacks import ATTACKS  # noqa: E402

from course_tools.grading.sandbox import bubblewrap  # noqa: E402

LIMITS = ["--timeout", "60", "--cell-timeout", "20", "--notebook-timeout", "60"]
WRONG = {  # a plausible mistake in the function cell: (exercise, text replaced, replacement)
    "no_sqrt_d": ("ex01_softmax_attention", "/ math.sqrt(q.shape[-1])", ""),
    "mask_diagonal": ("ex01_softmax_attention", "triu(1)", "triu(0)"),
    "beta_ignored": ("ex11_delta_rule", "beta[..., t, None] * error", "error"),
    "sign_flipped": ("ex11_delta_rule", "error = v[..., t, :] - (k_t.unsqueeze(-2) @ S).squeeze(-2)",
                     "error = (k_t.unsqueeze(-2) @ S).squeeze(-2) - v[..., t, :]"),
}


def notebook(folder: str, exercise: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / folder / f"{exercise}.ipynb", as_version=4)


def write_class(folder: Path) -> dict[str, str]:
    """The 30 submissions; {file name: kind}."""
    kinds = {}
    for i in range(12):
        exercise = ("ex01_softmax_attention", "ex11_delta_rule")[i % 2]
        nbformat.write(notebook("solutions", exercise), folder / f"correct_{i:02d}_{exercise}.ipynb")
        kinds[f"correct_{i:02d}"] = "correct"
    for i in range(8):
        exercise = ("ex01_softmax_attention", "ex11_delta_rule")[i % 2]
        nbformat.write(notebook("exercises", exercise), folder / f"stub_{i:02d}_{exercise}.ipynb")
        kinds[f"stub_{i:02d}"] = "stub"
    for name, (exercise, old, new) in WRONG.items():
        wrong = notebook("solutions", exercise)
        for cell in wrong.cells:
            cell.source = cell.source.replace(old, new)
        nbformat.write(wrong, folder / f"wrong_{name}_{exercise}.ipynb")
        kinds[f"wrong_{name}"] = "wrong"
    for i in range(2):
        endless = notebook("solutions", "ex01_softmax_attention")
        endless.cells.insert(3, nbformat.v4.new_code_cell("import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                                                          "while True:\n    pass"))
        nbformat.write(endless, folder / f"endless_{i}_ex01_softmax_attention.ipynb")
        kinds[f"endless_{i}"] = "hanging"
    for name in ("stack_frames.ipynb", "orphans.ipynb", "model_answer.ipynb", "classmates.ipynb"):
        hostile = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c.strip()) for c in ATTACKS[name]])
        hostile.metadata["course_lib"] = {"exercise": "ex01_softmax_attention", "function": "softmax_attention"}
        nbformat.write(hostile, folder / f"hostile_{Path(name).stem}_ex01.ipynb")
        kinds[f"hostile_{name}"] = "hostile"
    return kinds


def grade(paths: list[Path], *extra: str) -> tuple[float, str]:
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "course_tools.grade", *map(str, paths), *LIMITS, *extra],
                         capture_output=True, text=True, check=True)
    return time.monotonic() - started, run.stdout


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="class_of_30_"))
    try:
        kinds = write_class(folder)
        print(f"{len(kinds)} submissions: " + ", ".join(f"{sum(k == kind for k in kinds.values())} {kind}"
                                                       for kind in dict.fromkeys(kinds.values())))
        unsafe = () if bubblewrap() else ("--unsafe-no-sandbox",)
        print(f"sandbox: {'bubblewrap ' + str(bubblewrap()) if bubblewrap() else 'NONE (--unsafe-no-sandbox)'}")
        seconds, table = grade([folder], "--jobs", "2", *unsafe)
        print(f"\nclass of {len(kinds)}, --jobs 2: {seconds:.0f} s wall, {seconds / len(kinds):.1f} s per submission")
        print(table)
        one = next(folder.glob("correct_00_*.ipynb"))
        for label, extra in (("bubblewrap", ()), ("no sandbox", ("--unsafe-no-sandbox",))):
            if label == "bubblewrap" and not bubblewrap():
                continue
            times = sorted(grade([one], *extra)[0] for _ in range(3))
            print(f"one correct notebook alone, {label}: median {times[1]:.2f} s (min {times[0]:.2f}, max {times[2]:.2f})")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
