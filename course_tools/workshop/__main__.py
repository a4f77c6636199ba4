"""python -m course_tools.workshop guide [--check] | headers [--check] | measure [--recount] [NOTEBOOK ...] |
release [--out DIR] | slides [--tag] [--out DIR]: the instructor's kit. (The participants' pre-flight check is
``python -m course_tools.doctor``: it ships in the student copy.)"""

import argparse
import sys
from pathlib import Path

import nbformat

from course_tools.workshop import course_map, guide, headers, lessons, measure, release, slides


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_tools.workshop",
                                     description="The instructor's kit, generated from the notebooks.")
    commands = parser.add_subparsers(dest="command", required=True)
    write = commands.add_parser("guide", help=f"write {guide.GUIDE} from the notebooks (run from the repository)")
    write.add_argument("--check", action="store_true", help="only say whether the committed guide is up to date")
    timing = commands.add_parser("measure", help="run notebooks and record their minutes in their metadata")
    timing.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook in notebooks/")
    timing.add_argument("--recount", action="store_true",
                        help="keep the recorded run time, only apply the minutes rule again (after a text edit)")
    student = commands.add_parser("release", help="the student copy (no solutions, no quiz key): a folder and a zip")
    student.add_argument("--out", type=Path, default=Path("dist/linear-attention-course"),
                         help="folder to write; the zip goes beside it (default: dist/linear-attention-course)")
    decks = commands.add_parser("slides", help="one offline reveal.js deck per notebook (fetches reveal.js once)")
    decks.add_argument("--tag", action="store_true", help="only give untagged cells of the notebooks a slide type")
    decks.add_argument("--out", type=Path, default=Path("build/slides"), help="default: build/slides")
    tops = commands.add_parser("headers", help="write every notebook's badge and Colab cells (tagged course-header)")
    tops.add_argument("--check", action="store_true", help="only list the notebooks whose header is stale")
    args = parser.parse_args(argv)
    root = Path.cwd()
    if args.command == "headers":
        return _headers(root, check=args.check)
    if args.command == "slides":
        return _slides(root, tag_only=args.tag, out=args.out)
    if args.command == "guide":
        return _guide(root, check=args.check)
    if args.command == "release":
        folder, archive = release.build(root, args.out)
        files = sum(1 for path in folder.rglob("*") if path.is_file())
        print(f"wrote {folder} ({files} files) and {archive} ({archive.stat().st_size / 2**20:.1f} MiB)")
        return 0
    machine = measure.machine_label()
    for path in args.notebooks or lessons.notebook_paths(root):
        recorded = lessons.read_lesson(path).meta
        seconds = recorded["run_seconds"] if args.recount else measure.run_seconds(path)
        minutes = measure.record(path, seconds, recorded["measured_on"] if args.recount else machine)
        print(f"{path}: {seconds:.1f} s -> {minutes} teaching minutes")
    return 0


def _slides(root: Path, *, tag_only: bool, out: Path) -> int:
    paths = lessons.notebook_paths(root)
    if tag_only:
        for path in paths:
            notebook = nbformat.read(path, as_version=4)
            if slides.tag(notebook):
                nbformat.write(notebook, path)
                print(f"tagged {path}")
        return 0
    for deck in slides.build(paths, out):
        print(f"wrote {deck}")
    return 0


def _headers(root: Path, *, check: bool) -> int:
    paths = headers.stale(root) if check else headers.apply(root)
    for path in paths:
        print(f"{path} {'has a stale header: run python -m course_tools.workshop headers' if check else 'written'}")
    print(f"{len(paths)} of {len(headers.notebook_paths(root))} notebooks {'stale' if check else 'rewritten'}")
    return 1 if check and paths else 0


def _guide(root: Path, *, check: bool) -> int:
    found = lessons.problems(root)
    if found:
        print("the lesson metadata has problems:\n" + "\n".join(found), file=sys.stderr)
        return 1
    readme = root / "README.md"
    wanted = {root / guide.GUIDE: guide.render(root),  # the guide, and the README with its course map
              readme: course_map.replace_block(readme.read_text(encoding="utf-8"), course_map.render(root), where="README.md")}
    if check:
        stale = [path for path, text in wanted.items() if not path.exists() or path.read_text(encoding="utf-8") != text]
        for path in wanted:
            print(f"{path} is {'stale: run python -m course_tools.workshop guide' if path in stale else 'up to date'}")
        return 1 if stale else 0
    for path, text in wanted.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
