"""course_tools.grading.wire: what the grader decodes from a submission is bounded, and one failure is one result.

Each limit meets a frame crafted the way a hostile submission would (a deflate bomb, a directory
listing one entry many times, lists sharing references, a view of one number claiming terabytes);
the largest honest answers still decode whole. ``isolation.run_tests`` turns any failure of the
grader on one submission into that submission's zero. One batch (``python -m course_tools.grade``)
grades two bombs, written straight to the answer pipe by their notebooks, beside an honest
notebook: both score 0 with the limit named, and the grader stays under 500 MB.
"""

import csv
import importlib
import inspect
import io
import os
import struct
import subprocess
import sys
import time
import zipfile
import zlib
from pathlib import Path

import nbformat
import pytest
import torch
from mutants.misbehaving import correct

from course_tools.grading import grade, load_exercise, remote, wire
from course_tools.grading.isolation import run_tests
from course_tools.grading.registry import exercise_ids
from course_tools.grading.sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[1]
EX01 = {"exercise": "ex01_softmax_attention", "function": "softmax_attention"}


def shared_lists(levels: int = 15, width: int = 30) -> list:
    """The review's bomb: ``levels`` of ``[x] * width``, a few KB pickled, 30**15 items when walked."""
    bomb = [0.0]
    for _ in range(levels):
        bomb = [bomb] * width
    return bomb


def stored(name: str, data: bytes) -> tuple[str, bytes, int, int, int]:
    """A zip entry as ``torch.save`` writes one: (name, data, method 0 = stored, size, CRC)."""
    return name, data, 0, len(data), zlib.crc32(data)


def zip_archive(entries: list[tuple[str, bytes, int, int, int]], *, listed: int = 1) -> bytes:
    """A zip archive of (name, data as written, method, declared size, CRC) entries, each ``listed`` times in
    the directory (more than once: entries sharing their data)."""
    body, directory = b"", b""
    for name, data, method, size, crc in entries:
        raw = name.encode()
        directory += listed * (struct.pack("<4s6H3I5H2I", b"PK\x01\x02", 20, 20, 0, method, 0, 0, crc, len(data), size,
                                           len(raw), 0, 0, 0, 0, 0, len(body)) + raw)
        body += struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, 0, method, 0, 0, crc, len(data), size, len(raw), 0)
        body += raw + data
    count = listed * len(entries)
    return body + directory + struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, count, count, len(directory), len(body), 0)


def deflate_bomb(size: int) -> bytes:
    """An "ok" reply whose answer, ``size`` zero bytes (a multiple of 1 MiB), is deflated to about size / 1000."""
    placeholder = 70000  # pickled as BININT (b"J" + 4 bytes) twice: the storage's numel and the tensor's size
    source = zipfile.ZipFile(io.BytesIO(wire.pack(("ok", torch.zeros(placeholder, dtype=torch.uint8), [], False))))
    chunk, compressor, crc = bytes(1 << 20), zlib.compressobj(9, zlib.DEFLATED, -15), 0
    first = compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)
    again = compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)  # after a full flush: the same each time
    stream = first + again * ((size >> 20) - 1) + compressor.flush()
    for _ in range(size >> 20):
        crc = zlib.crc32(chunk, crc)
    entries = []
    for info in source.infolist():
        data = source.read(info)
        if info.filename.endswith("data/0"):
            entries.append((info.filename, stream, zipfile.ZIP_DEFLATED, size, crc))
        else:
            entries.append(stored(info.filename, data.replace(b"J" + struct.pack("<i", placeholder),
                                                              b"J" + struct.pack("<i", size))))
    return zip_archive(entries)


def reply(answer: object) -> bytes:
    """The frame payload a submission's process sends for ``answer``."""
    return wire.pack(("ok", answer, [], False))


def files(payload: bytes) -> dict[str, bytes]:
    archive = zipfile.ZipFile(io.BytesIO(payload))
    return {info.filename: archive.read(info) for info in archive.infolist()}


# --- the limits, one by one ------------------------------------------------------------------


def test_a_frame_announcing_more_than_the_cap_is_refused_before_it_is_read():
    read, write = os.pipe()
    try:
        os.write(write, wire.HEADER.pack(wire.MAX_FRAME_BYTES + 1))
        with pytest.raises(wire.Refused, match=f"more than the {wire.MAX_FRAME_BYTES:,} allowed"):
            wire.read_frame(read, deadline=time.monotonic() + 5)
    finally:
        os.close(read)
        os.close(write)


def test_a_compressed_entry_is_refused_before_it_is_inflated():
    payload = deflate_bomb(64 << 20)
    assert len(payload) < 100_000  # 64 MiB inflated
    with pytest.raises(wire.Refused, match="entry 'archive/data/0' is compressed"):
        wire.unpack(payload)


@pytest.mark.parametrize(("payload", "says"), [
    (zip_archive([stored(f"archive/{i}", b"") for i in range(wire.MAX_ENTRIES + 1)]),
     f"more than the {wire.MAX_ENTRIES} entries"),
    (zip_archive([stored("archive/data/0", bytes(1 << 20))], listed=40), "entries declare 41,943,040 bytes"),
    (zip_archive([("archive/data/0", b"0123", zipfile.ZIP_STORED, 1 << 30, 0)]), "declares 1,073,741,824 bytes"),
    (reply(list(range(30_000))), f"more than the {wire.MAX_PICKLE_BYTES:,} allowed"),
    (b"\x80\x02]q\x00.", "not a zip archive as torch.save writes it"),  # a bare pickle: torch.load's legacy format
], ids=["too_many_entries", "entries_sharing_data", "sizes_disagree", "large_pickle", "not_zip"])
def test_an_archive_beyond_the_limits_is_refused_before_torch_reads_it(payload, says):
    with pytest.raises(wire.Refused, match=says):
        wire.unpack(payload)


def test_lists_sharing_references_stop_at_the_item_budget_at_once():
    payload = reply(shared_lists())
    assert len(payload) < 10_000  # 30**15 items when walked
    started = time.perf_counter()
    with pytest.raises(wire.Refused, match=f"more than {wire.MAX_NODES:,} items"):
        wire.unpack(payload)
    assert time.perf_counter() - started < 1


def test_the_slowest_structure_the_pickle_cap_allows_decodes_in_seconds():
    """Int keys equal modulo 2**61 - 1 share one hash, so each insertion into a dict compares with every key before."""
    keys = wire.MAX_PICKLE_BYTES // 13  # an 8-byte int and its opcodes, a None: about 13 bytes of pickle a key
    payload = reply({1 + m * ((1 << 61) - 1): None for m in range(keys)})
    started = time.perf_counter()
    wire.unpack(payload)
    assert time.perf_counter() - started < 4


@pytest.mark.parametrize("answer", [
    torch.zeros(1).expand(10**6, 10**6),  # a stride-0 view: 4 TB over a storage of one number
    [torch.zeros(1 << 20, dtype=torch.uint8)] * 400,  # one 1 MiB tensor, reached 400 times
], ids=["stride_0_view", "shared_tensor"])
def test_a_view_counts_its_full_size_each_time_it_is_reached(answer):
    payload = reply(answer)
    assert len(payload) < (2 << 20)
    with pytest.raises(wire.Refused, match=f"more than {wire.MAX_FRAME_BYTES:,} bytes"):
        wire.unpack(payload)


def test_a_view_beyond_its_storage_is_refused_by_torch_load():
    archive = files(reply(torch.arange(1000.0)))
    pickle = archive["archive/data.pkl"]
    cut = pickle.rindex(b"M\xe8\x03")  # BININT2 1000: the view's size, after the storage's numel
    archive["archive/data.pkl"] = pickle[:cut] + b"M\xd0\x07" + pickle[cut + 3:]  # 2000 elements over 1000
    with pytest.raises(wire.WireError, match="not resizable"):
        wire.unpack(zip_archive([stored(name, data) for name, data in archive.items()]))


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors is in prototype stage")
@pytest.mark.parametrize("make", [
    lambda: torch.empty(10, device="meta"), lambda: torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)]),
], ids=["meta", "nested"])
def test_a_tensor_that_is_not_dense_on_the_cpu_is_not_plain_data(make):
    with pytest.raises(wire.WireError, match="not a plain dense tensor on the CPU"):
        wire.plain(make())


GRADERS = {exercise_id: importlib.import_module(f"course_tools.grading.exercises.{exercise_id}")
           for exercise_id in exercise_ids()}
LONG_N = {exercise_id: module.LONG_N for exercise_id, module in GRADERS.items() if hasattr(module, "LONG_N")}


@pytest.mark.parametrize("exercise_id", sorted(LONG_N))
def test_the_largest_honest_answers_decode_whole_with_four_times_headroom(exercise_id):
    """Every long_sequence test has d = dv = 2 in float32: its answer is [LONG_N, 2], the largest of its exercise."""
    answer = torch.randn(LONG_N[exercise_id], 2)
    payload = reply(answer)
    assert 4 * len(payload) <= wire.MAX_FRAME_BYTES
    started = time.perf_counter()
    decoded = wire.unpack(payload)
    assert time.perf_counter() - started < 2
    assert decoded[0] == "ok" and torch.equal(decoded[1], answer)


def test_an_answer_may_take_four_times_its_question_and_a_short_one_no_more_than_a_few_mb():
    """Long tests ask with q, k and v of [n, 2]: their answer fits their cap; a small question caps its answer at 4 MiB."""
    n = max(LONG_N.values())
    q = k = v = torch.randn(n, 2)
    question = wire.pack(("call", 0, ((q, k, v), {}), 1))
    assert 4 * len(reply(torch.randn(n, 2))) <= wire.answer_cap(len(question))
    assert wire.answer_cap(len(wire.pack(("call", 0, ((torch.randn(8, 2),), {}), 1)))) == wire.SMALL_ANSWER_BYTES
    read, write = os.pipe()
    try:
        os.write(write, wire.HEADER.pack(wire.SMALL_ANSWER_BYTES + 1))
        with pytest.raises(wire.Refused, match=f"more than the {wire.SMALL_ANSWER_BYTES:,} allowed"):
            wire.read_frame(read, deadline=time.monotonic() + 5, max_bytes=wire.answer_cap(100))
    finally:
        os.close(read)
        os.close(write)


# --- one submission's failure is its result, never the batch's end -----------------------------


def live_children() -> list[str]:
    """The command lines of this process's children that are still running."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
            if int(fields[1]) == os.getpid() and fields[0] != "Z":
                found.append((stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except (OSError, ValueError):
            pass  # ended while we looked
    return found


def test_a_sandbox_that_cannot_start_is_that_submissions_zero(monkeypatch, tmp_path):
    monkeypatch.setattr(remote, "SERVER", [str(tmp_path / "no-python-here")])
    exercise = load_exercise("ex01_softmax_attention")
    result, notes = run_tests(exercise, {}, Sandbox(tmp_path, use_bubblewrap=False), timeout=10)
    assert (result.score, result.ran, notes) == (0, False, [])
    assert result.message.startswith("the grader could not grade this submission: FileNotFoundError")


def test_a_memory_error_while_decoding_is_that_submissions_zero_and_its_process_dies(monkeypatch):
    def exhausted(obj: object, max_bytes: int) -> object:
        raise MemoryError

    monkeypatch.setattr(wire, "plain", exhausted)
    result = grade("ex01_softmax_attention", correct, timeout=30)
    assert (result.score, result.ran) == (0, False)
    assert "MemoryError" in result.message
    assert not [command for command in live_children() if "course_tools.grading.answers" in command]


# --- the batch: two bombs beside an honest notebook ----------------------------------------------

BOMB_IMPORTS = "import io, os, struct, sys, zipfile, zlib\nimport torch\nfrom course_tools.grading import wire"
WRITE_ANSWER = """
def softmax_attention(q, k, v, causal=False):
    wire.write_frame(int(sys.argv[-1]), ANSWER)  # the answer process's last argument: its end of the answer pipe
    return torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
"""
DEFLATE_BOMB_BYTES = 2000 << 20  # 2 GB inflated from 2 MB (the review's 3.4 GB from 3 MB, scaled to this machine)
# The grader's peak resident memory at exit: VmHWM, not ru_maxrss, which also keeps the peak of the process
# that started it (Linux carries the old address space's peak across exec, and subprocess starts by vfork).
MEASURE_PEAK = ("import atexit, runpy, sys; "
                "atexit.register(lambda: print(*(line for line in open('/proc/self/status') "
                "if line.startswith('VmHWM:')), end='', file=sys.stderr)); "
                "sys.argv[0] = 'course_tools.grade'; runpy.run_module('course_tools.grade', run_name='__main__')")


def bomb_notebook(*cells: str) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell.strip()) for cell in cells])
    notebook.metadata["course_lib"] = EX01
    return notebook


def bomb_class(folder: Path) -> None:
    """The batch's folder: the honest ex01 solution and two notebooks writing a bomb to the answer pipe."""
    nbformat.write(nbformat.read(ROOT / "solutions" / "ex01_softmax_attention.ipynb", as_version=4),
                   folder / "honest_ex01.ipynb")
    nbformat.write(bomb_notebook(BOMB_IMPORTS, inspect.getsource(shared_lists),
                                 "ANSWER = wire.pack(('ok', shared_lists(), [], False))", WRITE_ANSWER),
                   folder / "shared_lists_ex01.ipynb")
    nbformat.write(bomb_notebook(BOMB_IMPORTS, *map(inspect.getsource, (stored, zip_archive, deflate_bomb)),
                                 f"ANSWER = deflate_bomb({DEFLATE_BOMB_BYTES})", WRITE_ANSWER),
                   folder / "deflate_bomb_ex01.ipynb")


def grade_with_peak(folder: Path, scores: Path) -> tuple[subprocess.CompletedProcess, int]:
    """Run the batch command on ``folder``: (the finished run, the grader process's own peak RSS in bytes)."""
    limits = ["--jobs", "1", "--timeout", "30", "--cell-timeout", "10", "--notebook-timeout", "30"]
    run = subprocess.run([sys.executable, "-c", MEASURE_PEAK, str(folder), "--csv", str(scores), *limits],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    peaks = [line.split()[1] for line in run.stderr.splitlines() if line.startswith("VmHWM:")]  # in kB
    return run, int(peaks[-1]) * 1024 if peaks else -1


def test_a_batch_grades_bombs_as_zero_and_the_grader_stays_small(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    bomb_class(folder)
    run, peak = grade_with_peak(folder, tmp_path / "scores.csv")
    assert run.returncode == 0, run.stderr[-3000:]
    with (tmp_path / "scores.csv").open(newline="", encoding="utf-8") as file:
        rows = {Path(row["file"]).name: row for row in csv.DictReader(file)}
    assert rows["honest_ex01.ipynb"]["score"] == "10", rows["honest_ex01.ipynb"]
    assert (rows["shared_lists_ex01.ipynb"]["score"], rows["deflate_bomb_ex01.ipynb"]["score"]) == ("0", "0"), rows
    assert f"more than {wire.MAX_NODES:,} items" in rows["shared_lists_ex01.ipynb"]["reason"]
    assert "is compressed" in rows["deflate_bomb_ex01.ipynb"]["reason"]
    assert f"{wire.MAX_FRAME_BYTES:,}-byte" in rows["deflate_bomb_ex01.ipynb"]["reason"]
    assert 0 < peak < 500e6, f"the grader peaked at {peak / 1e6:.0f} MB"
