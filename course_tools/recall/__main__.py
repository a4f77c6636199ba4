"""python -m course_tools.recall [--quick] [--device D] [--jobs N] [--part mqar|text|both] [--out PATH] [--cache PATH]

The recall study (``study``: MQAR under the protocol) and the text verdict (``language``), as JSON and a plot.
Every finished run is appended to the cache (``--cache``) and never trained again, so a
study stopped at any point resumes where it stopped; the cache is kept (it is every run's raw record).
``--device cuda`` runs ``study.GPU``, Zoology's scale.
"""

import argparse
import sys
import time
from pathlib import Path
from statistics import median

import matplotlib

from course_lib.device import get_device
from course_lib.records import cli_output_path, finish_run, machine_metadata
from course_tools.recall import language, study
from course_tools.recall.figures import study_figure
from course_tools.recall.report import mqar_report, mqar_rows, text_report

matplotlib.use("Agg")  # the CLI only writes a PNG
STEP_LIMIT = 2.0  # the chunked delta and gated mixers should step within 2× elu+1's time
CHUNKED = ("delta", "delta, additive write", "gla", "gated delta")
CACHE_DIR = Path("benchmarks/results")


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, object]:
    parser = argparse.ArgumentParser(prog="python -m course_tools.recall", description=__doc__.split("\n\n")[1])
    parser.add_argument("--quick", action="store_true", help="a CI-sized study (seconds), written to a temporary folder")
    parser.add_argument("--device", default=None, help="default: course_lib.device.get_device(); cuda runs Zoology's scale")
    parser.add_argument("--jobs", type=int, default=1, help="runs trained at a time, one process and thread each (1)")
    parser.add_argument("--part", choices=("mqar", "text", "both"), default="both", help="which study to run (both)")
    parser.add_argument("--out", type=Path, default=None,
                        help="JSON to write, the PNG beside it (default: course_lib/results/recall_<device>.json)")
    parser.add_argument("--from-cache", action="store_true",
                        help="train nothing: report what the cache holds, settings still to train marked as such")
    parser.add_argument("--cache", type=Path, default=None, help="finished runs, JSON lines (default: "
                        "benchmarks/results/recall_<device>.runs.jsonl, or <out>.runs.jsonl beside a given --out)")
    args = parser.parse_args(argv)
    argv_out = args.out
    try:
        device = get_device(args.device)
    except ValueError as error:
        parser.error(f"--device {args.device}: {error}")
    if args.jobs < 1:
        parser.error(f"--jobs must be a positive int, got {args.jobs}")
    try:
        args.out = cli_output_path(args.out, stem="recall", device=device, quick=args.quick)
    except ValueError as error:
        parser.error(str(error))
    if args.cache is None:  # the default study's runs live in the repository (committed: the raw record)
        default = not args.quick and argv_out is None
        args.cache = (CACHE_DIR / f"{args.out.stem}.runs.jsonl") if default else args.out.with_suffix(".runs.jsonl")
    return args, device


def settings_for(device, quick: bool) -> tuple[study.StudySettings, language.TextSettings]:
    """QUICK on any device with --quick, else GPU on CUDA and CPU elsewhere (text: FULL either way)."""
    if quick:
        return study.QUICK, language.QUICK
    return (study.GPU if device.type == "cuda" else study.CPU), language.FULL


def step_check(rows: list[dict]) -> str:
    """Each chunked mixer's median step time over elu+1's, against ``STEP_LIMIT``."""
    lines = []
    for label in CHUNKED:
        ratios = [r["step_vs_elu1"] for r in rows if r["label"] == label and r["step_vs_elu1"] is not None]
        if ratios:
            verdict = "PASS" if median(ratios) <= STEP_LIMIT else "FAIL"
            lines.append(f"{label}: step time {median(ratios):.2f}× elu+1's (median of {len(ratios)} settings; "
                         f"limit {STEP_LIMIT}×) {verdict}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    args, device = parse_args(argv)
    meta = machine_metadata(device, quick=args.quick) | {"jobs": args.jobs}
    print(f"course_tools.recall on {meta['device_label']}, quick={args.quick}, part={args.part}\n\n{study.PROTOCOL}")
    mqar_settings, text_settings = settings_for(device, args.quick)
    cache = study.RunCache(args.cache)
    payload = {"meta": meta}
    if args.part in ("mqar", "both"):
        runner = study.Runner(device, cache, study.train_study_run, args.jobs, train=not args.from_cache)
        payload["mqar"] = study.run_study(mqar_settings, runner)
        runner.bar.close()
        print("\n" + mqar_report(payload["mqar"]) + "\n\n" + step_check(mqar_rows(payload["mqar"])))
    if args.part in ("text", "both"):
        runner = study.Runner(device, cache, language.train_language, args.jobs, train=not args.from_cache)
        payload["text"] = language.run_text_study(text_settings, runner)
        runner.bar.close()
        print("\nText (test bits per byte, lower is better; 95 % bootstrap intervals)\n"
              + (text_report(payload["text"]) if payload["text"]["cells"] else payload["text"]["status"]))
    used = [seed for part in ("mqar", "text") for cell in payload.get(part, {}).get("cells", []) for seed in cell["seeds"]]
    meta["cpu_hours"] = sum(result["cpu_seconds"] for result in cache.done.values()) / 3600
    print(f"\nCPU time of every run in the cache ({len(cache.done)} runs, {len(used)} of them reported seeds): "
          f"{meta['cpu_hours']:.2f} h")
    pictures = []
    if payload.get("mqar") and mqar_rows(payload["mqar"]):
        pictures.append(args.out.with_suffix(".png"))
        study_figure(payload["mqar"], meta["device_label"]).savefig(pictures[0], dpi=110)
    finish_run(args.out, payload, started, *pictures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
