"""tests/nbval_sanitize.cfg masks only rounding-level digits: the same correct result printed on two CPUs
compares equal, and a result outside its band (over a stated tolerance, or above rounding level) still
differs from the committed one, so the notebooks' checked cells can fail."""

import tomllib
from pathlib import Path

import pytest
from helpers import SANITIZE_FILE, sanitize

ROOT = Path(__file__).resolve().parents[1]


def test_pytest_compares_notebook_outputs_through_this_file():
    addopts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    assert f"--nbval-sanitize-with {SANITIZE_FILE.relative_to(ROOT)}" in addopts


@pytest.mark.parametrize("committed, fresh", [
    ("max |a - b| = 2.2e-16 (tolerance 1e-14)", "max |a - b| = 0.0e+00 (tolerance 1e-14)"),
    ("queries = 5.3e-15 (tolerance 1e-12)", "queries = 7.1e-15 (tolerance 1e-12)"),
    ("| yes 2.2e-16     | no  6e-17  | yes 0e+00", "| yes 2.8e-16     | no  1e-16  | yes 0e+00"),
    ("delta = -1.1e-16.", "delta = 4.4e-16."),
    ("max |lib - oracle| = 1.2e-07 (tol 1e-5)", "max |lib - oracle| = 2.4e-07 (tol 1e-5)"),
    ("   0.00e+00  8.56e-32 exact", "   0.00e+00  9.17e-32 exact"),
])
def test_the_same_result_on_another_cpu_compares_equal(committed, fresh):
    assert committed != fresh and sanitize(committed) == sanitize(fresh)


@pytest.mark.parametrize("committed, wrong", [
    ("max |a - b| = 2.2e-16 (tolerance 1e-14)", "max |a - b| = 5.0e-14 (tolerance 1e-14)"),  # over its tolerance
    ("max |a - b| = 2.2e-16 (tolerance 1e-12)", "max |a - b| = 3.0e-10 (tolerance 1e-12)"),  # float64 gone float32
    ("max |lib - oracle| = 1.2e-07 (tol 1e-5)", "max |lib - oracle| = 3.0e-04 (tol 1e-5)"),  # past float32 rounding
    ("recall 0.97 at P = 8", "recall 0.96 at P = 8"),  # ordinary numbers keep every digit
    ("(tolerance 1e-6)", "(tolerance 1e-5)"),  # tolerance literals stay as written
])
def test_a_result_outside_its_band_still_differs(committed, wrong):
    assert sanitize(committed) != sanitize(wrong)
