"""The recall study's protocol as the code enforces it: rates by validation, three seeds, softmax's ≥ 95 % rule,
budgets raised, the cache; its verdict arithmetic, report, figure and command."""

import json
import math
from dataclasses import replace

import matplotlib
import pytest
import torch

from course_lib.models import state_bytes
from course_tools.recall import study
from course_tools.recall.__main__ import main
from course_tools.recall.figures import study_figure
from course_tools.recall.report import ablation_rows, mqar_report, mqar_rows
from course_tools.recall.verdict import VALID_RECALL, gap_interval, is_valid, mean_interval

matplotlib.use("Agg")
RATES, SEEDS = (1e-3, 3e-3, 1e-2), (0, 1, 2)
VARIANTS = (study.VARIANTS[0], study.VARIANTS[1], study.VARIANTS[2], study.VARIANTS[5], study.VARIANTS[6],
            study.VARIANTS[7])  # softmax, elu+1, its normaliser ablation, decay, delta, its eraser ablation


def fake_trainer(run: study.StudyRun, device=None) -> dict:
    """A stand-in whose numbers follow rules the tests know: softmax solves P = 2 at 100 steps, P = 4 only at 200
    (one seed short of 95 % at 100), P = 8 never; validation prefers 3e-3, test would prefer 1e-2."""
    softmax = run.variant.mixer == "softmax"
    solved = softmax and (run.num_pairs == 2 or (run.num_pairs == 4 and run.steps >= 200))
    recall = 0.99 if solved else (0.94 if softmax and run.num_pairs == 4 and run.seed == 2 else 0.5 + 0.1 * run.seed)
    if softmax and run.num_pairs == 4 and run.steps < 200 and run.seed != 2:
        recall = 0.99
    return {"run": study.asdict(run), "validation_recall": 0.9 if run.lr == 3e-3 else 0.2,
            "test_recall": recall + (0.001 if run.lr == 1e-2 else 0.0), "by_distance": [
                {"from": 2, "to": 4, "recall": recall, "count": 10}, {"from": 4, "to": 8, "recall": recall / 2, "count": 5}],
            "state_bytes": 100 * (1 + VARIANTS.index(run.variant)), "step_seconds": 0.1 * (1 + run.seed),
            "tokens_per_second": 1000.0, "cpu_seconds": 1.0, "final_loss": 1.0}


SETTINGS = study.StudySettings(grid=((2, 16), (4, 16), (8, 32)), budgets=(100, 200), rates=RATES, seeds=SEEDS,
                               template=study.StudyRun(VARIANTS[0], 2, 16, 100, 1e-3, 0, vocab_size=32, d_model=16),
                               variants=VARIANTS)


@pytest.fixture
def studied(tmp_path):
    calls = []

    def trainer(run, device):
        calls.append(run)
        return fake_trainer(run)

    runner = study.Runner(torch.device("cpu"), study.RunCache(tmp_path / "runs.jsonl"), trainer)
    return study.run_study(SETTINGS, runner), calls, tmp_path / "runs.jsonl"


def test_a_setting_counts_only_where_softmax_reaches_95_percent_on_every_seed(studied):
    result, calls, _ = studied
    assert [(s["num_pairs"], s["status"], s.get("steps")) for s in result["status"]] == [
        (2, "verdict", 100), (4, "verdict", 200), (8, "budget", None)]
    assert [t["steps"] for t in result["status"][1]["tried"]] == [100, 200]  # the budget was raised for P = 4
    assert result["status"][1]["tried"][0]["softmax_test_recall"] == [0.99, 0.99, 0.94]  # one seed short: not valid
    trained = {(run.variant.label, run.num_pairs, run.steps) for run in calls}
    assert {label for label, pairs, _ in trained if pairs == 8} == {"softmax"}  # nothing else where softmax failed
    assert [t["softmax_test_recall"] for t in result["status"][2]["tried"]] == [[0.5], [0.5]]  # seed 0 failed: stop
    assert ("elu+1", 4, 100) not in trained and ("elu+1", 4, 200) in trained
    assert {(c["label"], c["num_pairs"]) for c in result["cells"]} == {(v.label, p) for v in VARIANTS for p in (2, 4)}


def test_the_rate_is_chosen_by_validation_and_every_seed_is_kept(studied):
    result, _, _ = studied
    for cell in result["cells"]:
        assert cell["chosen_lr"] == 3e-3  # validation's best, though test recall is higher at 1e-2
        assert [row["lr"] for row in cell["sweep"]] == list(RATES)
        assert [s["run"]["seed"] for s in cell["seeds"]] == list(SEEDS)
        assert {s["run"]["lr"] for s in cell["seeds"]} == {3e-3}


def test_an_interrupted_study_resumes_from_its_cache(studied):
    first, calls, cache = studied
    again = []
    runner = study.Runner(torch.device("cpu"), study.RunCache(cache), lambda run, device: again.append(run))
    assert study.run_study(SETTINGS, runner) == first and again == []
    assert len(cache.read_text().splitlines()) == len(calls)


def test_the_protocol_needs_three_rates_three_seeds_and_softmax_first():
    with pytest.raises(ValueError, match="needs >= 3 rates and >= 3 seeds"):
        replace(SETTINGS, seeds=(0, 1))
    with pytest.raises(ValueError, match="variants must start with softmax"):
        replace(SETTINGS, variants=VARIANTS[1:])


def test_intervals_and_the_validity_rule():
    interval = mean_interval([90.0, 95.0, 100.0])
    assert interval["mean"] == 95.0 and 90.0 <= interval["low"] < 95.0 < interval["high"] <= 100.0
    assert gap_interval([99.0, 99.5, 99.8], [50.0, 60.0, 55.0])["reading"] == "reference higher"
    assert gap_interval([50.0, 60.0, 55.0], [99.0, 99.5, 99.8])["reading"] == "other higher"
    assert gap_interval([90.0, 99.0, 60.0], [80.0, 95.0, 70.0])["reading"] == "cannot tell"
    assert is_valid([VALID_RECALL, 1.0, 0.99]) and not is_valid([1.0, 1.0, VALID_RECALL - 1e-9])
    with pytest.raises(ValueError, match="values must be a non-empty list of numbers"):
        mean_interval([])
    with pytest.raises(ValueError, match="other must be a non-empty list of numbers"):
        gap_interval([1.0], [float("nan")])


def test_the_report_gives_points_lost_with_intervals_and_reads_the_ablations(studied):
    result, _, _ = studied
    rows = {(r["label"], r["num_pairs"]): r for r in mqar_rows(result)}
    assert rows[("softmax", 2)]["lost"] is None
    lost = rows[("elu+1", 2)]["lost"]
    assert lost["gap"] == pytest.approx(99.0 - 60.0) and lost["reading"] == "reference higher"
    assert rows[("elu+1", 2)]["step_vs_elu1"] == 1.0 and rows[("delta", 2)]["seeds"] == [50.0, 60.0, 70.0]
    assert [b["recall"] for b in rows[("delta", 2)]["by_distance"]] == pytest.approx([0.6, 0.3])
    assert {(a["cause"], a["num_pairs"], a["reading"]) for a in ablation_rows(result)} == {
        (cause, p, "cannot tell") for cause in study.ABLATIONS for p in (2, 4)}
    text = mqar_report(result)
    assert "budget" in text and "points lost" in text and "the eraser" in text


def test_the_figure_plots_pairs_state_bytes_and_distance(studied):
    result, _, _ = studied
    figure = study_figure(result, "test device")
    titles = [ax.get_title() for ax in figure.axes]
    assert titles[0].startswith("recall against pairs") and "state size" in titles[1] and "distance" in titles[2]
    assert {line.get_label() for line in figure.axes[2].get_lines()} == {"softmax", "elu+1", "decay"}  # at P = 4, T = 16
    with pytest.raises(ValueError, match="no setting that counts"):
        study_figure({"cells": []}, "x")


def test_a_real_run_records_what_the_json_promises():
    run = study.StudyRun(study.VARIANTS[4], num_pairs=2, seq_len=16, steps=3, lr=1e-3, seed=0, vocab_size=32,
                         d_model=16, tokens_per_step=64, eval_examples=16)  # FAVOR+ at m = 4 dh
    result = study.train_study_run(run)
    assert set(result) >= {"validation_recall", "test_recall", "by_distance", "curve", "state_bytes", "tokens_per_second"}
    assert result["state_bytes"] == state_bytes("performer", d_model=16, n_heads=2, seq_len=16, performer_features=32)
    assert sum(b["count"] for b in result["by_distance"]) == 16 * 2 and len(result["curve"]) == 3
    assert 0 <= result["test_recall"] <= 1 and result["run"]["variant"]["features_per_dim"] == 4


def test_two_processes_give_the_same_runs_as_one(tmp_path):
    runs = [study.StudyRun(v, 2, 16, 3, 1e-3, 0, vocab_size=32, d_model=16, tokens_per_step=64, eval_examples=8)
            for v in study.VARIANTS[:2]]
    results = [study.Runner(torch.device("cpu"), study.RunCache(None), study.train_study_run, jobs)(runs)
               for jobs in (1, 2)]
    assert [r["test_recall"] for r in results[0]] == [r["test_recall"] for r in results[1]]
    assert [r["final_loss"] for r in results[0]] == [r["final_loss"] for r in results[1]]


def test_the_quick_command_writes_both_studies_and_resumes(tmp_path, capsys):
    out = tmp_path / "recall.json"
    assert main(["--quick", "--device", "cpu", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["mqar"]["status"][0]["status"] == "budget"  # 20 steps: softmax cannot pass the rule
    assert [c["label"] for c in result["text"]["cells"]] == ["softmax", "elu+1"]
    assert all(len(c["seeds"]) == 3 for c in result["text"]["cells"]) and result["meta"]["cpu_hours"] > 0
    printed = capsys.readouterr().out
    assert "Softmax first" in printed and "CPU time of every run" in printed
    lines = len(out.with_suffix(".runs.jsonl").read_text().splitlines())
    assert main(["--quick", "--device", "cpu", "--out", str(out), "--part", "mqar"]) == 0
    assert len(out.with_suffix(".runs.jsonl").read_text().splitlines()) == lines  # nothing trained again


def test_the_command_refuses_bad_arguments(tmp_path):
    for argv in (["--out", str(tmp_path / "recall.csv")], ["--jobs", "0"], ["--part", "neither"]):
        with pytest.raises(SystemExit):
            main(["--quick", *argv])


def test_the_gpu_grid_is_zoologys_scale_and_every_grid_is_a_valid_task():
    from course_tools.recall.__main__ import settings_for
    assert settings_for(torch.device("cuda"), quick=False)[0] is study.GPU
    assert settings_for(torch.device("cpu"), quick=False)[0] is study.CPU
    assert study.GPU.template.vocab_size == 8192 and study.GPU.template.d_model >= 64
    for settings in (study.CPU, study.GPU, study.QUICK):
        for pairs, length in settings.grid:
            run = replace(settings.template, num_pairs=pairs, seq_len=length)
            assert run.batch_size * length == settings.template.tokens_per_step  # the same tokens a step everywhere
            study.zoology_mqar(1, **run.task())  # refused if Zoology's layout cannot hold it


def test_the_default_study_keeps_its_runs_in_the_repository(monkeypatch, tmp_path):
    from course_tools.recall.__main__ import parse_args
    monkeypatch.chdir(tmp_path)
    (tmp_path / "course_lib" / "results").mkdir(parents=True)
    args, _ = parse_args(["--device", "cpu"])
    assert args.cache.as_posix() == "benchmarks/results/recall_cpu.runs.jsonl"
    args, _ = parse_args(["--device", "cpu", "--out", str(tmp_path / "x.json")])
    assert args.cache == tmp_path / "x.runs.jsonl"


def test_a_report_from_an_unfinished_cache_marks_what_is_still_to_train(studied, tmp_path):
    first, calls, cache = studied
    partial = tmp_path / "partial.jsonl"
    partial.write_text("\n".join(cache.read_text().splitlines()[:32]) + "\n")  # P = 2 done (30 runs), P = 4 begun
    runner = study.Runner(torch.device("cpu"), study.RunCache(partial), fake_trainer, train=False)
    result = study.run_study(SETTINGS, runner)
    assert [s["status"] for s in result["status"]] == ["verdict", "not yet trained", "not yet trained"]
    assert result["cells"] == [c for c in first["cells"] if c["num_pairs"] == 2]
    with pytest.raises(study.NotTrained, match="runs are not in the cache"):
        runner([replace(SETTINGS.template, seed=99)])


@pytest.mark.parametrize("peak, expected", [
    (3e-3, [1e-3, 3e-3, 1e-2]),  # an inner best: the grid is enough
    (1.0, [1e-3, 3e-3, 1e-2, 3e-2, 1e-1]),  # the top edge keeps winning: two rates above, then stop
    (7e-4, [3e-4, 1e-3, 3e-3, 1e-2]),  # 1e-3 wins at the bottom edge, 3e-4 beyond it does not: stop
    (2e-4, [1e-4, 3e-4, 1e-3, 3e-3, 1e-2]),  # 3e-4 wins as the new edge, so 1e-4 is tried (and loses)
])
def test_the_rate_grid_widens_past_an_edge_that_wins(peak, expected):
    def trainer(run, device):  # validation peaks at ``peak`` (log distance)
        return {"run": study.asdict(run), "validation_recall": -abs(math.log(run.lr / peak)), "test_recall": 0.5}

    runner = study.Runner(torch.device("cpu"), study.RunCache(None), trainer)
    cell, = study.rate_then_seeds(runner, [SETTINGS.template], RATES, SEEDS, lambda r: r["validation_recall"], study.WIDER)
    assert [row["lr"] for row in cell["sweep"]] == expected
    assert cell["chosen_lr"] == min(expected, key=lambda lr: abs(math.log(lr / peak)))


def test_a_run_that_diverges_is_scored_as_recalling_nothing_and_says_where():
    run = study.StudyRun(study.VARIANTS[1], num_pairs=2, seq_len=16, steps=30, lr=1e6, seed=0, vocab_size=32,
                         d_model=16, tokens_per_step=64, eval_examples=16)  # elu+1 at an absurd rate
    result = study.train_study_run(run)
    assert result["diverged_at"] is not None and result["diverged_at"] < 30 and result["final_loss"] is None
    assert result["test_recall"] == result["validation_recall"] == 0.0 and result["by_distance"] == []
    json.dumps(result, allow_nan=False)  # the cache stays strict JSON
    calm = study.train_study_run(replace(run, lr=1e-3, steps=3))
    assert calm["diverged_at"] is None and calm["final_loss"] is not None
