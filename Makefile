# The course's two set-up commands are `make lab` and `make test`; both create .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Installed first, before course_lib's own range (torch>=2.2) is resolved. On PyPI this is the
# CUDA build on Linux and the MPS build on macOS; on machines with a local CPU wheel it is that
# wheel. Override for another build, e.g. `make lab TORCH_SPEC=torch`.
TORCH_SPEC ?= torch==2.13.0
KERNEL_NAME ?= linear-attention-course
# Extra JupyterLab flags, e.g. LAB_ARGS="--no-browser --port 8890"; root (containers) needs --allow-root.
LAB_ARGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)
STAMP := $(VENV)/.installed-stamp
NOTEBOOKS := $(wildcard notebooks/*.ipynb) $(wildcard solutions/*.ipynb)

.PHONY: install lab test test-browser notebooks exercises guide release slides clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install "$(TORCH_SPEC)" || $(BIN)/python -m pip install torch
	$(BIN)/python -m pip install -e .
	touch $@

install: $(STAMP)

# The server's root is the repository (not notebooks/), so exercises/, solutions/, docs/ and the
# notebooks' ../exercises/ links are reachable; JupyterLab opens 00_start_here inside it.
# tests/test_lab.py starts the server with this same line (read through `make -n lab`).
lab: install
	$(BIN)/python -m ipykernel install --user --name $(KERNEL_NAME) --display-name "Linear Attention (course)"
	$(BIN)/jupyter lab --ServerApp.root_dir=. $(LAB_ARGS) notebooks/00_start_here.ipynb

# Two pytest workers (pytest-xdist), one file each at a time: a notebook's cells stay in one kernel and
# a module's fixtures in one process. On the 2-core CPU this took make test from ~330 s to ~290 s.
# PYTEST_JOBS=0 runs in one process.
# The graded-batch tests need bubblewrap (Debian's bubblewrap, installed here when missing and
# apt-get can run); without it they run against the weaker fallback and skip what it cannot do.
PYTEST_JOBS ?= 2
test: install
	-bash .ci/apt_install bwrap bubblewrap
	$(BIN)/python -m pytest $(if $(filter 0,$(PYTEST_JOBS)),,-n $(PYTEST_JOBS) --dist loadfile)

# JupyterLab + headless Chromium: run the explorer notebook, move a slider, save docs/explorer.png; then
# open one slide deck from the file system, advance a slide, save docs/slides.png.
# Installs selenium, and Debian's chromium + chromium-driver when missing (needs root or sudo).
test-browser: install
	$(BIN)/python -m pip install -q -e ".[browser]"
	bash .ci/install_chromium
	$(BIN)/python tests/browser_smoke.py --notebook notebooks/11_explorer.ipynb --screenshot docs/explorer.png
	$(MAKE) slides
	$(BIN)/python tests/slides_smoke.py --deck build/slides/05_the_ledger.slides.html --screenshot docs/slides.png

# Re-execute every notebook in place (CPU, so committed outputs do not depend on the author's GPU).
notebooks: install
	COURSE_DEVICE=cpu $(BIN)/jupyter nbconvert --to notebook --execute --inplace $(NOTEBOOKS)

# Regenerate the student notebooks in exercises/ from solutions/.
exercises: install
	$(BIN)/python -m course_lib.exercise_builder

# The instructor guide (docs/instructor_guide.md) from the notebooks' lesson metadata, the schedules and
# the graders' known mistakes; `python -m course_lib.workshop measure` re-times the notebooks first.
guide: install
	$(BIN)/python -m course_lib.workshop guide

# The student copy: notebooks, exercises, course_lib, results and README, without solutions/ or the quiz
# key, as dist/linear-attention-course/ and dist/linear-attention-course.zip.
release: install
	$(BIN)/python -m course_lib.workshop release

# One reveal.js deck per notebook in build/slides/ (nbconvert), with reveal.js, RequireJS, MathJax and
# jQuery fetched once from npm into build/slides/vendor/: the decks open offline from the file system.
slides: install
	$(BIN)/python -m course_lib.workshop slides --out build/slides

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis dist build
