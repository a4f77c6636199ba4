"""Tests for course_tools.bench: one --quick run end to end, and the pure pieces on synthetic numbers.

Nothing here asserts a speed: the machine is shared and timings are noisy.
"""

import json
import math
import subprocess
import sys
import time
from pathlib import Path
from dataclasses import replace

import matplotlib.pyplot as plt
import pytest
import torch

from course_lib import records
from course_lib.attention import linear_attention
from course_lib.cost import macs_causal_chunked, macs_linear
from course_lib.device import seeded_qkv
from course_lib.records import cli_output_path, device_label, finish_run, load_results, results_path
from course_lib.state import LinearAttentionState
from course_tools.bench import engine, gated, kernels, timing
from course_tools.bench.__main__ import main
from course_tools.bench.analysis import crossover_n, crossovers, ratio_rows, scaling
from course_tools.bench.baselines import PlainLedger, plain_causal_linear_attention, plain_linear_attention
from course_tools.bench.decode import decode_crossover
from course_tools.bench.flops import FLOPS_PER_MAC, roof_for, shaped_roof_for
from course_tools.bench.kernels import PAIRINGS
from course_tools.bench.plots import decode_figure, memory_figure, time_figure
from course_tools.bench.report import targets_text
from course_tools.bench.targets import COMPARISONS, TARGETS, evaluate_targets, measurements, verdict
from course_tools.bench.timing import matmul_share, peak_memory, running_peak, spread, time_repeats

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bench")
    command = [sys.executable, "-m", "course_tools.bench", "--suite", "all", "--quick", "--out", "tmp.json"]
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"quick run failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return folder, json.loads((folder / "tmp.json").read_text()), done.stdout


class TestQuickRun:
    def test_records_the_run(self, quick_run):
        _, result, _ = quick_run
        assert set(result) == {"meta", "crossover", "decode", "engine", "gated", "targets"}
        meta = result["meta"]
        for key in ("machine", "torch", "threads", "device", "dtype", "timestamp", "memory_method", "peers",
                    "device_label", "wall_s"):
            assert meta[key], f"meta[{key!r}] is empty"
        assert meta["device_label"] == device_label(meta) and "CPU" in meta["device_label"]
        assert meta["quick"] is True and meta["machine"]["cores"] >= 1
        assert result["crossover"]["settings"]["ns"] and result["decode"]["settings"]["tokens"] > 0

    def test_times_positive_and_finite(self, quick_run):
        _, result, _ = quick_run
        measured = [r for r in result["crossover"]["records"] if not r.get("skipped")]
        assert {r["name"] for r in measured} >= {"softmax", "sdpa", "sdpa_causal", "linear", "linear_causal_auto",
                                                 "linear_causal_chunked", "linear_causal_recurrent", "plain_linear",
                                                 "plain_linear_causal"}
        repeats = result["crossover"]["settings"]["repeats"]
        for r in measured:
            assert 0 < r["time_s"] < math.inf and r["peak_bytes"] >= 0, r
            assert len(r["times_s"]) == repeats and r["time_min_s"] <= r["time_s"] <= r["time_max_s"], r
            assert (r["time_min_s"], r["time_max_s"]) == (min(r["times_s"]), max(r["times_s"])), r
            if r["route"] == "linear":
                assert r["roof"]["fraction"] == pytest.approx(r["roof"]["time_s"] / r["time_s"])
        for name in ("kv_cache", "ledger", "plain_ledger"):
            decoder = result["decode"][name]
            assert all(0 < s < math.inf for s in decoder["curve_s"]), name
            assert decoder["last_over_first"] == pytest.approx(decoder["median_last_s"] / decoder["median_first_s"])
            assert decoder["q25_s"] <= decoder["median_s"] <= decoder["q75_s"], name
        assert result["decode"]["plain_ledger"]["bytes_first"] == result["decode"]["ledger"]["bytes_first"]
        assert set(result["decode"]["crossovers"]) == {"ledger", "plain_ledger"}

    def test_ratios_match_the_times(self, quick_run):
        _, result, _ = quick_run
        times = {(r["d"], r["heads"], r["n"], r["name"]): r["time_s"]
                 for r in result["crossover"]["records"] if not r.get("skipped")}
        assert result["crossover"]["ratios"], "no ratio rows"
        for row in result["crossover"]["ratios"]:
            slow, fast = row["pair"].split("/")
            key = (row["d"], row["heads"], row["n"])
            assert row["ratio"] == pytest.approx(times[(*key, slow)] / times[(*key, fast)])
            assert row["model_ratio"] == row["n"] / row["d"]
            assert row["ratio_min"] <= row["ratio"] <= row["ratio_max"], row
        pairs = {row["pair"] for row in result["crossover"]["ratios"]}
        assert {"sdpa/plain_linear", "sdpa_causal/plain_linear_causal"} <= pairs
        for c in result["crossover"]["crossovers"]:
            assert {"n_star_low", "n_star_high"} <= set(c), c

    def test_explicit_softmax_memory_holds_the_weights(self, quick_run):
        _, result, _ = quick_run
        softmax = [r for r in result["crossover"]["records"] if r["name"] == "softmax"]
        for r in softmax:  # the [1, H, N, N] fp32 weights are alive at once, at least
            assert r["peak_bytes"] >= r["heads"] * r["n"] ** 2 * 4, r

    def test_chunk_sweep_covers_every_d_and_marks_auto(self, quick_run):
        _, result, stdout = quick_run
        sweep, settings = result["crossover"]["chunk_sweep"], result["crossover"]["settings"]
        assert {(r["d"], r["chunk"]) for r in sweep["records"]} == {
            (d, c) for d in settings["ds"] for c in settings["chunk_sizes"]}
        assert all(0 < r["time_s"] < math.inf for r in sweep["records"])
        assert sweep["n"] == max(settings["ns"]) and set(sweep["auto"]) == {str(d) for d in settings["ds"]}
        assert "against the chunk size C" in stdout

    def test_skips_carry_a_reason(self, quick_run):
        _, result, _ = quick_run
        cap = result["crossover"]["settings"]["recurrent_max_n"]
        skipped = [r for r in result["crossover"]["records"] if r.get("skipped")]
        assert {r["name"] for r in skipped} == {"linear_causal_recurrent"}
        assert all(r["n"] > cap and "Python loop" in r["skipped"] for r in skipped)

    def test_targets_are_skipped_but_computed(self, quick_run):
        _, result, stdout = quick_run
        verdicts = {t["target"]: t for t in result["targets"]}
        expected = {target.name for target in TARGETS}
        measured = measurements(result["crossover"], result["decode"], result["engine"], result["gated"], quick=True)
        assert set(measured) == set(GOOD), "the made-up measurements of TestTargets have the real run's keys"
        assert set(verdicts) == expected and len(result["targets"]) == len(TARGETS) == 17
        backward = verdicts["causal forward+backward / forward time"]
        for name, t in verdicts.items():
            if t is backward and t["status"] == "NOT MEASURED":  # the backward raised: its error is the note
                assert t["value"] is None and t["note"].startswith("not measured: "), t
            elif name.startswith("fla ") and t["status"] == "NOT MEASURED":  # fla is optional: the note says why
                assert t["value"] is None and t["note"].startswith("fla "), t
            elif name == "KV cache slower than the ledger from token t*":  # None: the cache never stayed slower
                assert t["status"] == "SKIP (quick run)" and (t["value"] is None or t["value"] >= 0), t
            else:
                assert t["status"] == "SKIP (quick run)" and isinstance(t["value"], float), t
        assert "SKIP (quick run)" in stdout and "model N/d" in stdout

    def test_engine_ratios_match_its_times(self, quick_run):
        _, result, stdout = quick_run
        profile, decay, backward = (result["engine"][key] for key in ("profile", "decay", "backward"))
        # two separate measurements (profiled matmuls, unprofiled call): on a loaded machine the first can exceed
        # the second (seen under two pytest workers), and the share is then clamped at 0
        assert profile["matmul_s"] >= 0 and 0 <= profile["outside_share"] <= 1
        assert profile["outside_share"] == pytest.approx(max(0.0, 1 - profile["matmul_s"] / profile["call_s"]))
        assert profile["exp_s"] > 0 and profile["exp_share"] == pytest.approx(profile["exp_s"] / profile["call_s"])
        floor = profile["exp_s"] / (profile["matmul_s"] + profile["exp_s"])
        share = next(t for t in result["targets"] if t["target"] == "causal call time outside the matmuls (share)")
        assert share["floor_share"] == pytest.approx(floor) and f"floor exp / (matmuls + exp) {floor:.3g}" in stdout
        assert decay["long_over_short"] == pytest.approx(decay["decayed_long"]["time_s"]
                                                         / decay["decayed_short"]["time_s"])
        assert decay["decayed_over_undecayed"] == pytest.approx(decay["decayed_long"]["time_s"]
                                                                / decay["undecayed_long"]["time_s"])
        if "error" in backward:
            assert backward["error"].startswith("not measured: ") and backward["error"] in stdout
        else:
            assert backward["ratio"] == pytest.approx(backward["forward_backward"]["time_s"]
                                                      / backward["forward"]["time_s"])
        assert "share outside the matmuls" in stdout and "one exp over q and k alone" in stdout

    def test_writes_the_plots(self, quick_run):
        folder, _, stdout = quick_run
        for suffix in ("time", "memory", "decode"):
            png = folder / f"tmp_{suffix}.png"
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{png.name} is not a PNG"
        assert "[min-max]" in stdout and "t*" in stdout

    def test_figures_carry_the_device_bands_and_distinct_styles(self, quick_run):
        _, result, _ = quick_run
        label = result["meta"]["device_label"]
        time_fig = time_figure(result["crossover"], label)
        assert label in time_fig._suptitle.get_text()
        assert time_fig.axes[0].collections, "no min-max bands drawn"
        settings = result["crossover"]["settings"]  # the first panel: the smallest d, the most heads
        crossed = [c for c in result["crossover"]["crossovers"] if c["n_star"] is not None
                   and (c["d"], c["heads"]) == (min(settings["ds"]), max(settings["heads"]))]
        boxed = any("N* (median" in t.get_text() for t in time_fig.axes[0].texts)
        assert boxed == bool(crossed), f"crossover box drawn: {boxed}, crossings measured: {crossed}"
        memory = {line.get_label(): line for line in memory_figure(result["crossover"], label).axes[0].lines}
        sdpa, causal = memory["sdpa"], memory["sdpa_causal"]
        assert (sdpa.get_marker(), sdpa.get_linestyle()) != (causal.get_marker(), causal.get_linestyle())
        decode = decode_figure(result["decode"], label)
        assert label in decode._suptitle.get_text()
        assert {line.get_label() for line in decode.axes[0].lines} >= {"kv_cache", "ledger", "plain_ledger"}
        plt.close("all")


class TestCommandLine:
    def test_unknown_suite_is_an_argparse_error(self, capsys):
        with pytest.raises(SystemExit) as exit_info:
            main(["--suite", "everything"])
        assert exit_info.value.code == 2 and "--suite" in capsys.readouterr().err

    @pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
    def test_cuda_without_cuda_exits_2_with_a_message(self, capsys):
        with pytest.raises(SystemExit) as exit_info:
            main(["--device", "cuda", "--quick"])
        assert exit_info.value.code == 2 and "not available" in capsys.readouterr().err

    def test_out_must_be_json(self, capsys):
        with pytest.raises(SystemExit) as exit_info:
            main(["--device", "cpu", "--out", "results.txt"])
        assert exit_info.value.code == 2 and ".json" in capsys.readouterr().err


GOOD = {"at_n": 8192, "causal_speedup": 20.0, "causal_over_noncausal": {"4096": 1.1, "8192": 1.2},
        "worst_causal_over_noncausal": 1.2, "roof_fraction_causal": 0.6, "roof_fraction_noncausal": 0.7,
        "decode_last_over_first": 1.0, "ledger_bytes_first": 133120, "ledger_bytes_last": 133120,
        "ledger_bytes_constant": True, "profile_n": 8192, "outside_matmul_share": 0.1, "exp_share": 0.05,
        "floor_share": 0.1, "decay_ns": "65536/16384", "decay_long_n": 65536, "decay_long_over_short": 4.1,
        "decay_over_undecayed": 1.1, "backward_n": 4096, "backward_over_forward": 2.5, "backward_error": None,
        "step_us": 30.0, "ledger_faster_from": 256, "ledger_crossover_status": "crossed",
        "memory_n": 16384, "prefill_memory_ratio": 1.0, "gated_n": 4096, "gated_speedup_per_channel": 12.0,
        "gated_speedup_scalar": 15.0, "gated_backward_per_channel": 3.0, "gated_backward_scalar": 2.5,
        "fla_simple_gla_over_ours": 1.2, "fla_simple_gla_note": None, "fla_gated_delta_over_ours": 1.5,
        "fla_gated_delta_note": None, "fla_version": "0.6.0"}
EDGE = GOOD | {"causal_speedup": 15.0, "worst_causal_over_noncausal": 1.3, "roof_fraction_causal": 0.5,
               "decode_last_over_first": 1.2, "outside_matmul_share": 0.2, "decay_long_over_short": 4.5,
               "decay_over_undecayed": 1.3, "backward_over_forward": 3.0, "step_us": 40.0, "ledger_faster_from": 512,
               "prefill_memory_ratio": 1.2, "gated_speedup_per_channel": 10.0, "gated_speedup_scalar": 10.0,
               "gated_backward_per_channel": 3.5, "gated_backward_scalar": 3.5, "fla_simple_gla_over_ours": 1.0,
               "fla_gated_delta_over_ours": 1.0}
JUST_PAST = {  # (measurements, the one target that fails)
    "speedup": (GOOD | {"causal_speedup": 14.99}, "causal linear / SDPA causal speedup"),
    "causal overhead": (GOOD | {"worst_causal_over_noncausal": 1.3001}, "causal / non-causal linear time (worst N)"),
    "roof": (GOOD | {"roof_fraction_causal": 0.4999}, "causal linear fraction of the matmul roof"),
    "decode drift": (GOOD | {"decode_last_over_first": 1.2001}, "ledger decode latency last/first, bytes constant"),
    "decode bytes": (GOOD | {"ledger_bytes_last": 133124, "ledger_bytes_constant": False},
                     "ledger decode latency last/first, bytes constant"),
    "outside matmuls": (GOOD | {"outside_matmul_share": 0.2001}, "causal call time outside the matmuls (share)"),
    "decay scaling": (GOOD | {"decay_long_over_short": 4.5001}, "decayed causal time, 4x the tokens / 1x"),
    "decay overhead": (GOOD | {"decay_over_undecayed": 1.3001}, "decayed / undecayed causal time"),
    "backward": (GOOD | {"backward_over_forward": 3.0001}, "causal forward+backward / forward time"),
    "step": (GOOD | {"step_us": 40.01}, "ledger step latency, us per token (median)"),
    "ledger crossover": (GOOD | {"ledger_faster_from": 513}, "KV cache slower than the ledger from token t*"),
    "cache never slower": (GOOD | {"ledger_faster_from": None, "ledger_crossover_status": "cache never stays slower"},
                           "KV cache slower than the ledger from token t*"),
    "prefill memory": (GOOD | {"prefill_memory_ratio": 1.2001}, "causal prefill peak memory / SDPA causal's"),
    "gated speedup per channel": (GOOD | {"gated_speedup_per_channel": 9.99},
                                  "gated chunked / recurrent speedup, per-channel gate"),
    "gated speedup scalar": (GOOD | {"gated_speedup_scalar": 9.99}, "gated chunked / recurrent speedup, scalar gate"),
    "gated backward per channel": (GOOD | {"gated_backward_per_channel": 3.5001},
                                   "gated chunked forward+backward / forward, per-channel"),
    "gated backward scalar": (GOOD | {"gated_backward_scalar": 3.5001},
                              "gated chunked forward+backward / forward, scalar"),
    "fla simple gla": (GOOD | {"fla_simple_gla_over_ours": 0.999},
                       "fla naive_chunk_simple_gla / gated chunked scalar time"),
    "fla gated delta": (GOOD | {"fla_gated_delta_over_ours": 0.999},
                        "fla naive_chunk_gated_delta_rule / gated delta chunked time"),
}


class TestTargets:
    def test_all_pass_inside_the_limits(self):
        assert [v["status"] for v in evaluate_targets(GOOD, quick=False)] == ["PASS"] * len(TARGETS)

    def test_limits_themselves_pass(self):
        assert all(v["passed"] for v in evaluate_targets(EDGE, quick=False))

    @pytest.mark.parametrize("which", list(JUST_PAST), ids=str)
    def test_each_fails_just_past_its_limit(self, which):
        measured, expected = JUST_PAST[which]
        failing = [v["target"] for v in evaluate_targets(measured, quick=False) if v["status"] == "FAIL"]
        assert failing == [expected], f"{which}: failing targets {failing}"

    def test_every_target_is_shown_to_fail(self):
        assert {expected for _, expected in JUST_PAST.values()} == {target.name for target in TARGETS}

    def test_each_row_judges_a_measured_number_with_a_known_comparison(self):
        for target in TARGETS:
            assert target.measured in GOOD and target.comparison in COMPARISONS and target.why, target.name
            assert set(target.details.values()) <= set(GOOD), target.name
            assert verdict(target, GOOD, quick=False) == verdict(target, GOOD, quick=False)

    def test_measurements_take_the_worst_n_from_4096_and_the_ratios_at_the_targets_n(self):
        def run(name, n, time_s):
            return {"name": name, "n": n, "heads": 8, "d": 64, "time_s": time_s, "roof": {"fraction": 0.5},
                    "peak_bytes": 100}

        records = [run(name, n, time_s) for n in (2048, 4096, 8192, 16384)
                   for name, time_s in (("linear", 1.0), ("linear_causal_auto", 1 + n / 2**15), ("sdpa_causal", 20.0))]
        measured = measurements({"records": records}, None, None, quick=False)
        assert measured["causal_over_noncausal"] == {"4096": 1.125, "8192": 1.25, "16384": 1.5}
        assert measured["worst_causal_over_noncausal"] == 1.5 and measured["causal_speedup"] == 20 / 1.25
        assert (measured["at_n"], measured["memory_n"], measured["prefill_memory_ratio"]) == (8192, 16384, 1.0)

    def test_quick_run_skips_but_keeps_the_verdict(self):
        verdicts = evaluate_targets(JUST_PAST["roof"][0], quick=True)
        assert {v["status"] for v in verdicts} == {"SKIP (quick run)"}
        assert [v["target"] for v in verdicts if not v["passed"]] == ["causal linear fraction of the matmul roof"]

    def test_missing_numbers_are_not_measured(self):
        verdicts = evaluate_targets({}, quick=False)
        assert {v["status"] for v in verdicts} == {"NOT MEASURED"}

    def test_a_backward_that_raised_is_not_measured_with_its_error(self):
        error = "not measured: one of the variables needed for gradient computation has been modified"
        measured = GOOD | {"backward_over_forward": None, "backward_error": error}
        verdicts = {v["target"]: v for v in evaluate_targets(measured, quick=False)}
        backward = verdicts["causal forward+backward / forward time"]
        assert backward["status"] == "NOT MEASURED" and backward["note"] == error
        assert [v["status"] for v in verdicts.values()].count("PASS") == len(TARGETS) - 1
        assert error in targets_text(list(verdicts.values()))

    def test_the_verdict_carries_its_details_and_why_but_the_table_prints_only_the_details(self):
        verdicts = {v["target"]: v for v in evaluate_targets(GOOD, quick=False)}
        decode = verdicts["ledger decode latency last/first, bytes constant"]
        assert decode["limit"] == "<= 1.2, equal bytes" and (decode["bytes_first"], decode["bytes_last"]) == (133120,) * 2
        assert verdicts["decayed causal time, 4x the tokens / 1x"]["ns"] == "65536/16384"
        text = targets_text(list(verdicts.values()))
        assert "bytes_first=133120" in text and "ns=65536/16384" in text and decode["why"] not in text

    def test_names_carry_no_issue_numbers(self):
        for v in evaluate_targets(GOOD, quick=False):
            assert not v["target"][0].isdigit(), v["target"]


class TestCrossover:
    NS = [256, 512, 1024, 2048, 4096]

    @pytest.mark.parametrize("n_star", [300.0, 700.0, 1024.0, 3000.0])
    def test_recovers_a_power_law_crossing(self, n_star):
        ratios = [(n / n_star) ** 1.5 for n in self.NS]  # straight on log-log: interpolation is exact
        found, status = crossover_n(self.NS, ratios)
        assert status == "crossed" and found == pytest.approx(n_star, rel=1e-12)

    def test_no_crossing_either_way(self):
        assert crossover_n(self.NS, [2.0] * 5) == (None, "linear faster at every N")
        assert crossover_n(self.NS, [0.1, 0.2, 0.3, 0.4, 0.5]) == (None, "softmax faster at every N")

    def test_first_rise_through_one_counts(self):
        found, _ = crossover_n([100, 200, 400, 800], [0.5, 2.0, 0.5, 2.0])
        assert found == pytest.approx(141.42135623730952)  # √(100·200): log-midpoint of the first crossing

    def test_n_star_proportional_to_d_fits_exponent_one(self):
        records = []
        for d in (32, 64, 128):
            for n in self.NS:  # softmax/linear time ratio = n / (12·d): N* = 12·d
                records += [{"d": d, "heads": 8, "n": n, "name": "sdpa", "time_s": n / (12 * d)},
                            {"d": d, "heads": 8, "n": n, "name": "linear", "time_s": 1.0}]
        rows = ratio_rows(records, PAIRINGS)
        found = crossovers(rows)
        assert [c["n_star"] for c in found] == pytest.approx([384.0, 768.0, 1536.0])
        fit = scaling(found)[0]
        assert fit["exponent"] == pytest.approx(1.0) and fit["prefactor"] == pytest.approx(12.0)


class TestRoof:
    def test_square_roof_matches_the_flops(self):
        roof = roof_for(2 * 8 * 512**3, 8)  # eight 512×512 products
        assert (roof.bh, roof.m, roof.k, roof.p, roof.scale) == (8, 512, 512, 512, 1.0)
        odd = roof_for(2 * 8 * 500**3 + 12345, 8)  # side rounds, scale corrects
        assert odd.m == 500 and odd.matmul_flops * odd.scale == pytest.approx(odd.flops)

    def test_shaped_roof_of_exact_multiples(self):
        bh, n, d = 8, 1024, 64
        linear = FLOPS_PER_MAC * macs_linear(n, n, d, d)  # 4Nd² = 2·(2Nd²)
        assert shaped_roof_for(bh * linear, bh, n, d).p == 2 * d
        chunked = FLOPS_PER_MAC * macs_causal_chunked(n, d, d, 64)  # 4Nd² + 4NCd with C = d: r = 4
        roof = shaped_roof_for(bh * chunked, bh, n, d)
        assert (roof.m, roof.k, roof.p, roof.scale) == (n, d, 4 * d, 1.0)

    def test_shaped_roof_rounds_and_scales(self):
        unit = 2 * 2 * 100 * 16 * 16
        roof = shaped_roof_for(int(2.4 * unit), 2, 100, 16)
        assert roof.p == 32 and roof.scale == pytest.approx(1.2)
        small = shaped_roof_for(unit // 4, 2, 100, 16)  # r rounds up to at least 1
        assert small.p == 16 and small.scale == pytest.approx(0.25)
        assert roof.matmul_flops * roof.scale == pytest.approx(roof.flops)

    def test_roofs_refuse_nonpositive_sizes(self):
        with pytest.raises(ValueError, match="must be positive"):
            roof_for(0, 8)
        with pytest.raises(ValueError, match="must be positive"):
            shaped_roof_for(100, 8, 0, 64)


class TestMatmulShare:
    def test_a_call_without_matmuls_is_all_outside(self):
        x = torch.ones(2**16)
        share = matmul_share(lambda: (x * 2).exp().sum(), CPU, min_run_time=0.01)
        assert share["matmul_s"] == 0 and share["call_s"] > 0 and share["outside_share"] == 1.0

    def test_matmuls_are_counted_by_their_self_time(self):
        g = torch.Generator().manual_seed(0)
        a, b = torch.randn(8, 128, 128, generator=g), torch.randn(128, 128, generator=g)
        share = matmul_share(lambda: (torch.bmm(a, a), a[0] @ b, torch.baddbmm(a, a, a)), CPU, min_run_time=0.01)
        assert 0 < share["matmul_s"] <= share["profiled_call_s"] and 0 <= share["outside_share"] < 1
        assert share["outside_share"] == max(0.0, 1 - share["matmul_s"] / share["call_s"])

    def test_the_share_is_of_the_call_timed_without_the_profiler(self, monkeypatch):
        """The profiled call's own time is recorded beside, not divided by (module docstring of timing)."""
        monkeypatch.setattr(timing, "time_call", lambda fn, min_run_time: 4.0)
        a = torch.randn(8, 64, 64, generator=torch.Generator().manual_seed(0))
        share = timing.matmul_share(lambda: torch.bmm(a, a), CPU)
        assert share["call_s"] == 4.0 and share["outside_share"] == pytest.approx(1 - share["matmul_s"] / 4.0)
        assert share["profiled_call_s"] < 1.0


class TestGated:
    TINY = replace(gated.QUICK, n=24, heads=2, d=8, repeats=2)

    def test_the_quick_run_times_every_group_and_its_ratios_match(self, quick_run):
        _, result, stdout = quick_run
        run = result["gated"]
        assert set(run) == {"settings", "speedup", "backward", "peers"} and run["settings"]["n"] == gated.QUICK.n
        assert set(run["speedup"]) == {"per_channel", "scalar", "gated_delta"}
        for group, slow, fast in [(g, "recurrent", "chunked") for g in run["speedup"].values()] + [
                (g, "forward_backward", "forward") for g in run["backward"].values()]:
            assert group["ratio"] == pytest.approx(group[slow]["time_s"] / group[fast]["time_s"])
            assert group["ratio_min"] <= group["ratio_max"] and len(group[slow]["times_s"]) == gated.QUICK.repeats
        assert all(g["chunked"]["peak_bytes"] > 0 and g["form"]["time_s"] > 0 for g in run["speedup"].values())
        peers = run["peers"]
        for name in ("simple_gla", "gated_delta"):  # timed where fla imports, else the note says why
            if name in peers:
                assert peers[name]["agreement"] <= gated.AGREEMENT_RTOL, peers[name]
                assert peers[name]["ratio"] == pytest.approx(peers[name]["fla"]["time_s"]
                                                             / peers[name]["course_lib"]["time_s"])
            else:
                assert peers["version"] is None and peers["note"].startswith("fla not"), peers
        assert "recurrence / chunked" in stdout and "fla's pure-torch references" in stdout

    def test_a_tiny_run_has_the_same_structure(self, monkeypatch):
        monkeypatch.setattr(gated, "fla_gated_peers", lambda: ({}, "fla not installed", None))
        run = gated.run_gated(self.TINY, CPU)
        assert run["peers"] == {"note": "fla not installed", "version": None}
        measured = measurements(None, None, None, run, quick=True)
        assert measured["gated_n"] == 24 and measured["fla_simple_gla_note"] == "fla not installed"
        verdicts = {v["target"]: v for v in evaluate_targets(measured, quick=True)}
        assert verdicts["gated chunked / recurrent speedup, scalar gate"]["status"] == "SKIP (quick run)"
        fla = verdicts["fla naive_chunk_simple_gla / gated chunked scalar time"]
        assert fla["status"] == "NOT MEASURED" and fla["note"] == "fla not installed"

    def test_a_peer_whose_output_differs_is_recorded_not_timed(self, monkeypatch):
        def wrong(q, k, v, *args, **kwargs):  # [B, T, H, ·] in and out, like fla's, but not the same sums
            return v * 2, None

        fake = ({"simple_gla": wrong, "gated_delta": wrong}, "fake", "0")
        monkeypatch.setattr(gated, "fla_gated_peers", lambda: fake)
        peers = gated.run_peers(self.TINY, CPU)
        for name in ("simple_gla", "gated_delta"):
            assert peers[name]["agreement"] > gated.AGREEMENT_RTOL and "differs from ours" in peers[name]["error"]
            assert "course_lib" not in peers[name]
        note = measurements(None, None, None, {"settings": {"n": 24}, "speedup": GATED_RESULT, "backward": GATED_RESULT,
                                               "peers": peers}, quick=False)["fla_gated_delta_note"]
        assert "differs from ours" in note

    def test_the_peers_compute_our_sums_where_fla_imports(self):
        pytest.importorskip("fla", exc_type=ImportError)
        peers, note, version = kernels.fla_gated_peers()
        if not peers:
            pytest.skip(note)
        calls = gated._peer_calls(gated.gated_inputs(self.TINY, CPU), peers)
        assert all(gated.agreement(pair) < 1e-5 for pair in calls.values()) and version


GATED_RESULT = {gate: {"ratio": 1.0} for gate in ("per_channel", "scalar")}


class TestEngine:
    SETTINGS = replace(engine.QUICK, backward_n=16, heads=2, d=8, repeats=1)

    def test_a_backward_that_raises_is_recorded_not_raised(self, monkeypatch):
        def in_place_failure(q, k, v, **kwargs):
            raise RuntimeError("one of the variables needed for gradient computation has been modified\nhint")

        monkeypatch.setattr(engine, "linear_attention", in_place_failure)
        result = engine.run_backward(self.SETTINGS, CPU)
        assert result == {"n": 16, "error": "not measured: one of the variables needed for gradient computation "
                                            "has been modified"}

    def test_a_differentiable_call_is_timed_forward_and_backward(self, monkeypatch):
        monkeypatch.setattr(engine, "linear_attention", lambda q, k, v, causal: plain_causal_linear_attention(q, k, v))
        result = engine.run_backward(self.SETTINGS, CPU)
        assert result["ratio"] == pytest.approx(result["forward_backward"]["time_s"] / result["forward"]["time_s"])
        assert len(result["forward"]["times_s"]) == self.SETTINGS.repeats

    def test_exp_pass_takes_exp_of_every_entry_of_q_and_k_block_by_block(self, monkeypatch):
        q, k = torch.randn(1, 2, 10, 3), torch.randn(1, 2, 10, 3)
        seen, real_exp = [], torch.exp

        def recording_exp(x, *, out):
            seen.append(x.clone())
            return real_exp(x, out=out)

        call = engine.exp_pass(q, k, rows=4)
        monkeypatch.setattr(torch, "exp", recording_exp)
        call()
        assert [block.shape[-2] for block in seen] == [4, 4, 4, 4, 2, 2]  # q and k in turns, a short last block
        assert torch.equal(torch.cat(seen[0::2], dim=-2), q) and torch.equal(torch.cat(seen[1::2], dim=-2), k)


class TestPeakMemory:
    def test_running_peak_follows_time_order(self):
        assert running_peak([(3, -100), (1, 100), (2, 50), (4, 10)]) == 150
        assert running_peak([]) == 0

    def test_known_temporary_is_counted(self):
        nbytes = 4 * 2**20

        def allocate_temporary():
            scratch = torch.ones(nbytes // 4)  # 4 MiB of float32, freed on return
            return scratch.sum()

        measured = peak_memory(allocate_temporary, CPU)
        assert nbytes <= measured < nbytes + 64 * 1024, f"measured {measured} bytes for a {nbytes}-byte temporary"

    def test_two_live_temporaries_add_up(self):
        def two_at_once():
            a, b = torch.ones(2**20), torch.ones(2**20)  # both alive together: 8 MiB
            return (a + b).sum()  # plus the 4 MiB sum

        assert peak_memory(two_at_once, CPU) >= 12 * 2**20

    def test_in_place_work_allocates_nothing(self):
        x = torch.zeros(2**20)
        assert peak_memory(lambda: x.add_(1.0), CPU) < 1024


class TestSpread:
    def test_repeats_and_their_spread(self):
        x = torch.ones(64)
        seconds = time_repeats(lambda: x.sum(), CPU, repeats=3, min_run_time=0.001)
        assert len(seconds) == 3 and all(0 < s < 1 for s in seconds)
        assert spread([3.0, 1.0, 2.0]) == {"time_s": 2.0, "time_min_s": 1.0, "time_max_s": 3.0,
                                          "times_s": [3.0, 1.0, 2.0]}

    def test_bad_repeats_are_refused(self):
        with pytest.raises(ValueError, match="repeats must be a positive int, got 0"):
            time_repeats(lambda: None, CPU, repeats=0, min_run_time=0.001)
        with pytest.raises(ValueError, match="at least one timing"):
            spread([])

    def test_ratio_bounds_and_crossover_band(self):
        records = []
        for n in (100, 200, 400, 800):  # softmax/linear median ratio = n / 300, repeats within ±10 %
            records += [{"d": 8, "heads": 1, "n": n, "name": "sdpa", "time_s": n / 300, "time_min_s": 0.9 * n / 300,
                         "time_max_s": 1.1 * n / 300},
                        {"d": 8, "heads": 1, "n": n, "name": "linear", "time_s": 1.0}]
        rows = ratio_rows(records, [("sdpa", "linear")])
        assert [r["ratio_min"] / r["ratio"] for r in rows] == pytest.approx([0.9] * 4)
        assert [r["ratio_max"] / r["ratio"] for r in rows] == pytest.approx([1.1] * 4)
        (c,) = crossovers(rows)
        assert c["n_star"] == pytest.approx(300.0) and c["n_star_low"] < 300 < c["n_star_high"]
        assert c["n_star_low"] == pytest.approx(300 / 1.1) and c["n_star_high"] == pytest.approx(300 / 0.9)

    def test_device_label(self):
        meta = {"device": "cpu (2 threads)", "threads": 2, "torch": "2.13.0",
                "machine": {"cpu_model": "AMD EPYC", "cores": 2}}
        assert device_label(meta) == "2-core CPU (AMD EPYC), 2 threads, torch 2.13.0"
        assert device_label({"device": "cuda:0 (NVIDIA H200)", "torch": "2.13.0"}) == "cuda:0 (NVIDIA H200), torch 2.13.0"


class TestBaselines:
    """The plain-torch contenders compute what course_lib computes (float64, n != m, ragged last chunk)."""

    def qkv(self, n: int, m: int):
        return seeded_qkv(2, 3, n=n, m=m, d=8, dv=5)  # float64

    def test_plain_linear_matches_course_lib(self):
        q, k, v = self.qkv(7, 11)
        gap = (plain_linear_attention(q, k, v) - linear_attention(q, k, v)).abs().max().item()
        assert gap < 1e-12, f"max |plain - course_lib| = {gap:.2e}"

    @pytest.mark.parametrize("chunk", [1, 4, 64])
    def test_plain_causal_matches_course_lib(self, chunk):
        q, k, v = self.qkv(13, 13)
        gap = (plain_causal_linear_attention(q, k, v, chunk) - linear_attention(q, k, v, causal=True)).abs().max()
        assert gap.item() < 1e-12, f"chunk {chunk}: max |plain - course_lib| = {gap.item():.2e}"

    def test_plain_forms_are_differentiable(self):
        g = torch.Generator().manual_seed(1)
        q, k, v = (torch.randn(1, 1, 5, 3, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
        assert torch.autograd.gradcheck(lambda a, b, c: plain_causal_linear_attention(a, b, c, 2), (q, k, v))
        assert torch.autograd.gradcheck(plain_linear_attention, (q, k, v))

    def test_plain_ledger_matches_the_state(self):
        q, k, v = self.qkv(9, 9)
        ledger, state = PlainLedger((2, 3), 8, 5, dtype=torch.float64), LinearAttentionState()
        gap = max((ledger.step(q[:, :, t], k[:, :, t], v[:, :, t]) - state.step(q[:, :, t], k[:, :, t], v[:, :, t]))
                  .abs().max().item() for t in range(9))
        assert gap < 1e-12 and ledger.nbytes == state.nbytes == 2 * 3 * (8 * 5 + 8) * 8


class TestDecodeCrossover:
    TS = list(range(0, 3000, 100))
    LEDGER = {"median_s": 2.05e-4, "q25_s": 1.55e-4, "q75_s": 3.05e-4}

    def test_growing_cache_and_quartile_band(self):
        found = decode_crossover(self.TS, [1e-4 + 1e-7 * t for t in self.TS], self.LEDGER)
        assert (found["t_star"], found["t_star_low"], found["t_star_high"]) == (1100, 600, 2100)
        assert found["status"] == "crossed"

    def test_a_stall_does_not_move_the_crossing(self):
        curve = [1e-4 + 1e-7 * t for t in self.TS]
        curve[3] = 1e-2  # one bin hit by the scheduler
        assert decode_crossover(self.TS, curve, self.LEDGER)["t_star"] == 1100

    def test_cache_that_never_stays_slower_and_short_curves_are_refused(self):
        found = decode_crossover([0, 1, 2], [1.0, 1.0, 1.0], {"median_s": 2.0, "q25_s": 2.0, "q75_s": 2.0})
        assert found["t_star"] is None and found["status"] == "cache never stays slower"
        with pytest.raises(ValueError, match="same length >= 2"):
            decode_crossover([0], [1.0], {"median_s": 2.0, "q25_s": 2.0, "q75_s": 2.0})


class TestCommittedResults:
    def test_paths_name_the_device(self):
        assert results_path("cpu").name == "bench_cpu.json" and results_path("cuda").parent.name == "results"
        assert results_path("cpu", "recall").name == "recall_cpu.json"
        with pytest.raises(ValueError, match=r"device_type must be one of \('cpu', 'cuda'\), got 'mps'"):
            results_path("mps")
        with pytest.raises(ValueError, match=r"stem must be one of \('bench', 'recall'\), got 'sweep'"):
            results_path("cpu", "sweep")

    def test_a_cli_writes_where_out_says_else_results_else_a_temporary_folder(self):
        cpu = torch.device("cpu")
        assert cli_output_path(Path("x/run.json"), stem="bench", device=cpu, quick=True) == Path("x/run.json")
        assert cli_output_path(None, stem="recall", device=cpu, quick=False) == Path("course_lib/results/recall_cpu.json")
        quick = cli_output_path(None, stem="recall", device=cpu, quick=True)
        assert quick.name == "recall_cpu.json" and quick.parent.is_dir() and "results" not in quick.parts
        with pytest.raises(ValueError, match="--out must name a .json file, got x.csv"):
            cli_output_path(Path("x.csv"), stem="bench", device=cpu, quick=False)

    def test_a_run_ends_with_its_wall_time_in_the_json_and_where_each_file_went(self, tmp_path, capsys):
        out, picture = tmp_path / "new" / "run.json", tmp_path / "run.png"
        finish_run(out, {"meta": {"quick": True}}, time.perf_counter() - 2.0, picture)
        assert 2.0 <= json.loads(out.read_text())["meta"]["wall_s"] < 60
        assert capsys.readouterr().out.startswith(f"\nwrote {out}\nwrote {picture}\nwall time ")

    def test_missing_run_is_none_and_quick_run_is_refused(self, tmp_path, monkeypatch):
        monkeypatch.setattr(records, "RESULTS_DIR", tmp_path)
        assert load_results("cuda") is None
        (tmp_path / "bench_cpu.json").write_text(json.dumps({"meta": {"quick": True}}))
        with pytest.raises(ValueError, match="holds a --quick run"):
            load_results("cpu")

    def test_the_committed_cpu_run_is_a_full_run_with_every_section(self):
        payload = load_results("cpu")
        assert payload is not None, "course_lib/results/bench_cpu.json is not committed"
        assert payload["meta"]["quick"] is False and payload["meta"]["device"].startswith("cpu")
        assert {"crossover", "decode", "targets"} <= set(payload)
        assert payload["crossover"]["settings"]["ns"][-1] >= 8192 and payload["decode"]["settings"]["tokens"] >= 16384
        for t in payload["targets"]:  # a full run judges every target, or says why it could not
            assert t["status"] in ("PASS", "FAIL") or (t["status"] == "NOT MEASURED" and t.get("note")), t
