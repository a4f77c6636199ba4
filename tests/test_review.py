"""course_tools.grading.review: which submissions a person should read.

The block on the model answer is by name; these are the ways around it that review must see, and
the honest notebooks (every solution and exercise, which import course_lib for helpers and for the
"Try it" comparison) it must not flag.
"""

from pathlib import Path

import nbformat
import pytest

from course_tools.grading.notebooks import code_cells
from course_tools.grading.registry import load_exercise
from course_tools.grading.review import review

ROOT = Path(__file__).resolve().parents[1]
EX01 = load_exercise("ex01_softmax_attention")
NOTEBOOKS = sorted(ROOT.glob("solutions/ex*.ipynb")) + sorted(ROOT.glob("exercises/ex*.ipynb"))
HEADER = "def softmax_attention(q, k, v, causal=False):\n"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_honest_notebooks_are_not_flagged(path):
    notebook = nbformat.read(path, as_version=4)
    assert review(code_cells(notebook), load_exercise(notebook.metadata["course_lib"]["exercise"])) == []


def test_the_try_it_comparison_with_the_reference_is_not_flagged():
    cells = ["from course_lib import attention as reference\nimport torch.nn.functional as F",
             HEADER + "    return F.softmax(q @ k.transpose(-2, -1), dim=-1) @ v",
             "error = (softmax_attention(q, k, v) - reference.softmax_attention(q, k, v)).abs().max()\n"
             "fused = F.scaled_dot_product_attention(q, k, v)"]
    assert review(enumerate(cells, start=1), EX01) == []


@pytest.mark.parametrize(("cells", "finding"), [
    pytest.param(["import importlib.util, pathlib, course_lib\n"
                  "spec = importlib.util.spec_from_file_location('x', pathlib.Path(course_lib.__file__).parent\n"
                  "                                              / 'attention.py')"],
                 "uses spec_from_file_location (cell 1, line 2)", id="attention.py under another name"),
    pytest.param(["import sys\ndel sys.modules['course_lib.attention']\nimport course_lib.attention as fresh"],
                 "uses sys.modules (cell 1, line 2)", id="re-imported after deleting it from sys.modules"),
    pytest.param(["import torch", HEADER + "    return torch.ops.aten._scaled_dot_product_attention_math(q, k, v)[0]"],
                 "uses torch.ops.aten (cell 2, line 2)", id="torch.ops.aten"),
    pytest.param(["import torch", HEADER + "    return torch._C._nn.scaled_dot_product_attention(q, k, v)"],
                 "uses torch._C (cell 2, line 2)", id="torch._C"),
    pytest.param(["from course_lib import attention as reference\nmine = reference.softmax_attention",
                  HEADER + "    return mine(q, k, v, causal)"],
                 "softmax_attention uses the model answer course_lib.attention.softmax_attention (cell 1, line 2)",
                 id="the model answer under another name"),
    pytest.param(["from course_lib import softmax_attention"],
                 "softmax_attention uses the model answer course_lib.softmax_attention (cell 1, line 1)",
                 id="the model answer imported as the answer"),
    pytest.param(["import torch.nn.functional as F",
                  HEADER + "    return getattr(F, 'scaled_dot_' + 'product_attention')(q, k, v)"],
                 "softmax_attention uses torch.nn.functional as a whole, which holds the model answer (cell 2, line 2)",
                 id="getattr on the module"),
    pytest.param(["m = __import__('course_lib.attention')"], "uses __import__ (cell 1, line 1)", id="__import__"),
    pytest.param(["exec(open('a.py').read())"], "uses exec (cell 1, line 1)", id="exec"),
    pytest.param(["import runpy"], "imports runpy (cell 1, line 1)", id="runpy"),
    pytest.param(["import imp"], "imports imp (cell 1, line 1)", id="imp"),
    pytest.param(["import sys, os, course_lib\n"
                  "sys.path.insert(0, os.path.dirname(course_lib.__file__))\nimport attention"],
                 "imports attention, a course_lib module, by its bare name (cell 1, line 3)", id="sys.path"),
    pytest.param(["%run /somewhere/course_lib/attention.py"], "runs %run (cell 1, line 1)", id="%run"),
    pytest.param(["!cp ../course_lib/attention.py mine.py"], "runs a shell command (!) (cell 1, line 1)", id="shell"),
    pytest.param(["from course_tools.grading import answers"], "imports course_tools.grading.answers (cell 1, line 1)",
                 id="the channel"),
    pytest.param(["get_ipython().input_transformers_post.append(rewrite)"],
                 "uses input_transformers_post (cell 1, line 1)", id="a hook that rewrites later cells"),
    pytest.param(["x = 1", "this cell is not Python; importlib"],
                 "importlib in a cell that does not parse (cell 2, line 1)", id="a cell that does not parse"),
])
def test_ways_around_the_block_by_name_are_flagged(cells, finding):
    assert finding in review(enumerate(cells, start=1), EX01)


def test_each_kind_is_reported_once_where_it_first_occurs():
    cells = ["import torch", "a = torch.ops.aten.mm", "b = torch.ops.aten.mm"]
    assert review(enumerate(cells, start=1), EX01) == ["uses torch.ops.aten (cell 2, line 1)"]
