"""The text verdict's byte-level model: a fixed three-way split by file, an epoch that sees every window once,
one quick run, and the text study's protocol."""

import math
import sysconfig
import zlib
from dataclasses import replace
from pathlib import Path

import torch

from course_tools.recall import language, study
from course_tools.recall.language import QUICK, SPLITS, corpus, split_of, stdlib_files, train_language
from course_tools.recall.report import text_report, text_rows


def fake_stdlib(root, names):
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {name}\nprint({name!r})\n" * 20)
    return root


def test_files_skip_tests_site_packages_and_idlelib_and_come_sorted(tmp_path):
    root = fake_stdlib(tmp_path, ["b.py", "a.py", "json/decoder.py", "test/test_a.py", "site-packages/x/y.py",
                                  "idlelib/run.py", "notes.txt"])
    assert [p.relative_to(root).as_posix() for p in stdlib_files(root)] == ["a.py", "b.py", "json/decoder.py"]


def test_the_split_is_by_file_and_follows_the_crc_rule(tmp_path):
    names = [f"m{i}.py" for i in range(80)]
    root = fake_stdlib(tmp_path, names)
    data = corpus(root, max_bytes=None)
    for split, remainder in (("test", 0), ("validation", 1)):
        held_out = [n for n in sorted(names) if zlib.crc32(n.encode()) % 10 == remainder]
        assert held_out and all(split_of(n) == split for n in held_out)
        assert bytes(data[split].tolist()) == b"".join((root / n).read_bytes() + b"\n" for n in held_out)
    assert sum(data[s].numel() for s in SPLITS) == sum((root / n).stat().st_size + 1 for n in names)
    assert corpus(root, max_bytes=100)["train"].numel() == 100


def test_the_real_standard_library_holds_out_about_a_tenth_for_each_of_validation_and_test():
    root = Path(sysconfig.get_paths()["stdlib"])
    files = stdlib_files(root)
    assert len(files) > 200 and not any("site-packages" in p.parts for p in files)
    for split in ("validation", "test"):
        share = sum(split_of(p.relative_to(root).as_posix()) == split for p in files) / len(files)
        assert 0.05 < share < 0.15, (split, share)


def test_a_quick_run_sees_every_training_window_once_and_reports_bits_per_byte(monkeypatch, tmp_path):
    data = corpus(fake_stdlib(tmp_path, [f"m{i}.py" for i in range(60)]), max_bytes=QUICK.template.max_bytes)
    monkeypatch.setattr(language, "_stdlib_corpus", lambda max_bytes: data)
    run = replace(QUICK.template, epochs=2)
    result = train_language(run)
    windows = (data["train"].numel() - 1) // run.seq_len
    assert result["steps"] == 2 * windows // run.batch_size  # two epochs of every window
    assert 0 < result["test_bits_per_byte"] < 9 and math.isfinite(result["validation_bits_per_byte"])
    assert 0 <= result["test_accuracy"] <= 1 and len(result["curve"]) == 8 and result["parameters"] > 0


def test_the_text_study_chooses_the_lowest_validation_bits_per_byte_and_reports_the_gap():
    def trainer(run, device):
        score = {1e-3: 3.0, 3e-3: 2.5, 1e-2: 2.8}[run.lr] + (0.5 if run.variant.label == "elu+1" else 0.0)
        return {"run": study.asdict(run), "validation_bits_per_byte": score, "test_bits_per_byte": score + 0.01 * run.seed,
                "test_accuracy": 0.5, "curve": [4.0, 3.0], "steps": 10, "step_seconds": 0.1}

    runner = study.Runner(torch.device("cpu"), study.RunCache(None), trainer)
    result = language.run_text_study(QUICK, runner)
    assert [c["chosen_lr"] for c in result["cells"]] == [3e-3, 3e-3]
    rows = {r["label"]: r for r in text_rows(result)}
    assert rows["elu+1"]["gap"]["gap"] == 0.5 and rows["elu+1"]["gap"]["reading"] == "reference higher"
    assert rows["softmax"]["gap"] is None and "worse" in text_report(result)


def test_a_text_run_that_diverges_is_scored_as_the_uniform_model(monkeypatch, tmp_path):
    data = corpus(fake_stdlib(tmp_path, [f"m{i}.py" for i in range(60)]), max_bytes=QUICK.template.max_bytes)
    monkeypatch.setattr(language, "_stdlib_corpus", lambda max_bytes: data)
    result = train_language(replace(QUICK.template, lr=1e6))
    assert result["diverged_at"] is not None and result["test_bits_per_byte"] == 8.0 == result["validation_bits_per_byte"]
