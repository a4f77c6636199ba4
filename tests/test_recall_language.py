"""The byte-level language model of the standard library: a fixed split by file, windows, one quick run."""

import math
import sysconfig
import zlib
from pathlib import Path

import torch

from course_tools.recall.language import QUICK, corpus, is_validation, stdlib_files, train_language, windows


def fake_stdlib(root, names):
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {name}\nprint({name!r})\n")
    return root


def test_files_skip_tests_site_packages_and_idlelib_and_come_sorted(tmp_path):
    root = fake_stdlib(tmp_path, ["b.py", "a.py", "json/decoder.py", "test/test_a.py", "site-packages/x/y.py",
                                  "idlelib/run.py", "notes.txt"])
    assert [p.relative_to(root).as_posix() for p in stdlib_files(root)] == ["a.py", "b.py", "json/decoder.py"]


def test_the_split_is_by_file_and_follows_the_crc_rule(tmp_path):
    names = [f"m{i}.py" for i in range(60)]
    root = fake_stdlib(tmp_path, names)
    data = corpus(root)
    held_out = [n for n in sorted(names) if zlib.crc32(n.encode()) % 10 == 0]
    assert held_out and all(is_validation(n) for n in held_out)
    expected = b"".join((root / n).read_bytes() + b"\n" for n in sorted(names) if n in held_out)
    assert bytes(data["validation"].tolist()) == expected
    assert data["train"].numel() + data["validation"].numel() == sum((root / n).stat().st_size + 1 for n in names)


def test_the_real_standard_library_is_found_and_about_a_tenth_is_held_out():
    root = Path(sysconfig.get_paths()["stdlib"])
    files = stdlib_files()
    assert len(files) > 200 and not any("site-packages" in p.parts for p in files)
    share = sum(is_validation(p.relative_to(root).as_posix()) for p in files) / len(files)
    assert 0.05 < share < 0.15, share


def test_windows_are_slices_of_the_data():
    data = torch.arange(100, dtype=torch.uint8)
    got = windows(data, 5, 7, torch.Generator().manual_seed(0))
    assert got.shape == (5, 8) and got.dtype == torch.long
    for row in got:
        assert torch.equal(row, torch.arange(int(row[0]), int(row[0]) + 8))


def test_a_quick_run_reports_bits_per_byte_and_accuracy(tmp_path):
    root = fake_stdlib(tmp_path, [f"m{i}.py" for i in range(40)])
    result = train_language(QUICK, corpus(root))
    assert 0 < result["validation_bits_per_byte"] < 9 and math.isfinite(result["train_bits_per_byte"])
    assert 0 <= result["validation_accuracy"] <= 1 and result["steps"] == QUICK.steps and result["parameters"] > 0
