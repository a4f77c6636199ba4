"""python -m course_tools.recall [--quick] [--device D] [--jobs N] [--out PATH]: the recall sweep, as JSON and a plot.

Finished runs are kept in ``<out>.partial.jsonl`` until the whole sweep is written, so an
interrupted sweep started again with the same ``--out`` trains only what is missing.
"""

import argparse
import sys
import time
from pathlib import Path

import matplotlib

from course_lib.records import cli_output_path, finish_run, machine_metadata, table
from course_lib.device import get_device
from course_lib.recall import sweep
from course_tools.recall import language

matplotlib.use("Agg")  # the CLI only writes a PNG


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, object]:
    parser = argparse.ArgumentParser(prog="python -m course_tools.recall",
                                     description="Train every mixer on multi-query associative recall (MQAR) "
                                     "across num_pairs and head dims, and as a byte-level language model of "
                                     "Python's standard library; write the results and a plot.")
    parser.add_argument("--quick", action="store_true", help="a CI-sized sweep (seconds), written to a temporary folder")
    parser.add_argument("--device", default=None, help="default: course_lib.device.get_device()")
    parser.add_argument("--jobs", type=int, default=1, help="runs trained at a time, one process and thread each (1)")
    parser.add_argument("--out", type=Path, default=None,
                        help="JSON file to write, the PNG next to it (default: course_lib/results/recall_<device>.json; "
                        "with --quick a fresh temporary directory)")
    args = parser.parse_args(argv)
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
    return args, device


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    args, device = parse_args(argv)
    meta = machine_metadata(device, quick=args.quick) | {"jobs": args.jobs}
    print(f"course_tools.recall on {meta['device_label']}, quick={args.quick}")
    settings = sweep.QUICK if args.quick else sweep.FULL
    partial = args.out.with_suffix(".partial.jsonl")  # finished runs; an interrupted sweep resumes from it
    result = sweep.run_sweep(settings, device, jobs=args.jobs, partial=partial)
    rows = [[r["mixer"], r["head_dim"], r["num_pairs"], r["mean"], r["lowest"], r["highest"]] for r in result["summary"]]
    print(table(["mixer", "head dim", "pairs", "recall", "lowest", "highest"], rows))
    result["language"] = language.run_language(language.QUICK if args.quick else language.FULL, device,
                                               mixers=settings.mixers,
                                               max_bytes=language.QUICK_BYTES if args.quick else None)
    print(table(["mixer", "parameters", "validation bits/byte", "next-byte accuracy", "seconds"],
                [[r["mixer"], r["parameters"], r["validation_bits_per_byte"], r["validation_accuracy"], r["seconds"]]
                 for r in result["language"]["runs"]]))
    picture = args.out.with_suffix(".png")
    sweep.sweep_figure(result["summary"], meta["device_label"]).savefig(picture, dpi=110)
    finish_run(args.out, {"meta": meta, **result}, started, picture)
    partial.unlink()  # only once the whole sweep is written
    return 0


if __name__ == "__main__":
    sys.exit(main())
