"""``python -m course_tools.bench [--suite crossover|decode|engine|gated|all] [--device cpu|cuda] [--out FILE.json]
[--quick]``.

Full runs write ``course_lib/results/bench_<device>.json`` (relative to the current
directory) unless ``--out`` says otherwise. A ``--quick`` run (CI-sized, tens of seconds)
writes to a fresh temporary directory unless ``--out`` is given, so its numbers never
overwrite the committed full-run results. PNGs go next to the JSON, same stem.
"""

import argparse
import sys
import time
from pathlib import Path

import matplotlib
import torch

matplotlib.use("Agg")  # the CLI only writes PNGs; a notebook importing course_tools.bench keeps its own backend
from course_lib import records  # noqa: E402
from course_lib.device import get_device  # noqa: E402
from course_tools.bench import analysis, crossover, decode, engine, gated, kernels, plots, report, targets  # noqa: E402
from course_tools.bench.timing import memory_method  # noqa: E402


SUITES = ("crossover", "decode", "engine", "gated")


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, torch.device]:
    parser = argparse.ArgumentParser(
        prog="python -m course_tools.bench",
        description="Time and peak memory of softmax against linear attention (crossover), of decoding "
        "(KV cache against the ledger), of the causal engine (profile, decay, backward) and of the gated ledger "
        "(chunked against recurrent, backward, fla's references), with PASS/FAIL targets.",
    )
    parser.add_argument("--suite", choices=(*SUITES, "all"), default="all")
    parser.add_argument("--device", choices=("cpu", "cuda"), default=None,
                        help="default: course_lib.device.get_device()")
    parser.add_argument("--out", type=Path, default=None,
                        help="JSON file to write, PNGs next to it (default: course_lib/results/bench_<device>.json; "
                        "with --quick a fresh temporary directory)")
    parser.add_argument("--quick", action="store_true", help="CI-sized sweep; targets print as SKIP")
    args = parser.parse_args(argv)
    try:
        device = get_device(args.device)
    except ValueError as error:
        parser.error(f"--device {args.device}: {error}")  # exits with code 2
    if device.type not in ("cpu", "cuda"):
        parser.error(f"the benchmark measures memory on cpu or cuda only, got default device {device}; pass --device")
    try:
        args.out = records.cli_output_path(args.out, stem="bench", device=device, quick=args.quick)
    except ValueError as error:
        parser.error(str(error))
    return args, device


def run_crossover(device: torch.device, quick: bool, contenders: list) -> dict:
    result = crossover.run_crossover(crossover.QUICK if quick else crossover.FULL, device, contenders)
    result["ratios"] = analysis.ratio_rows(result["records"], kernels.PAIRINGS)
    result["crossovers"] = analysis.crossovers(result["ratios"])
    result["scaling"] = analysis.scaling(result["crossovers"])
    result["chunk_sweep"] = crossover.run_chunk_sweep(crossover.QUICK if quick else crossover.FULL, device)
    return result


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    args, device = parse_args(argv)
    suites = list(SUITES) if args.suite == "all" else [args.suite]
    contenders, peers = kernels.contenders()
    payload = {"meta": report.run_metadata(device, quick=args.quick, suites=suites,
                                           memory_method=memory_method(device), peers=peers)}
    label = payload["meta"]["device_label"]
    print(f"course_tools.bench on {label}, quick={args.quick}; {peers}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    stem, pictures = args.out.with_suffix(""), []
    if "crossover" in suites:
        payload["crossover"] = run_crossover(device, args.quick, contenders)
        print("\n" + report.crossover_text(payload["crossover"]))
        pictures += plots.crossover_plots(payload["crossover"], stem, label)
    if "decode" in suites:
        payload["decode"] = decode.run_decode(decode.QUICK if args.quick else decode.FULL, device)
        print("\n" + report.decode_text(payload["decode"]))
        pictures.append(plots.decode_plot(payload["decode"], stem, label))
    if "engine" in suites:
        payload["engine"] = engine.run_engine(engine.QUICK if args.quick else engine.FULL, device)
        print("\n" + report.engine_text(payload["engine"]))
    if "gated" in suites:
        payload["gated"] = gated.run_gated(gated.QUICK if args.quick else gated.FULL, device)
        print("\n" + report.gated_text(payload["gated"]))
    measured = targets.measurements(payload.get("crossover"), payload.get("decode"), payload.get("engine"),
                                    payload.get("gated"), quick=args.quick)
    payload["targets"] = targets.evaluate_targets(measured, quick=args.quick)
    print("\n" + report.targets_text(payload["targets"]))
    records.finish_run(args.out, payload, started, *pictures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
