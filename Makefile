# The repository's targets; the set-up rules (make lab, install, install-dev) are in make/course.mk.
DEV_EXTRAS = test,instructor,book
include make/course.mk
NOTEBOOKS ?= $(wildcard notebooks/*.ipynb) $(wildcard solutions/*.ipynb)

.PHONY: install install-dev lab kernel test test-release test-browser book test-hub hub hub-install notebooks exercises guide release slides clean recall recall-gpu

# Two pytest workers (pytest-xdist), one file each at a time: a notebook's cells stay in one kernel and
# a module's fixtures in one process. On the 2-core CPU this took make test from ~330 s to ~290 s.
# PYTEST_JOBS=0 runs in one process.
# The graded-batch tests need bubblewrap (Debian's bubblewrap, installed here when missing and
# apt-get can run); without it they grade with --unsafe-no-sandbox and skip what only the sandbox stops.
PYTEST_JOBS ?= 2
test: install-dev
	-bash .ci/apt_install bwrap bubblewrap
	$(BIN)/python -m pytest $(if $(filter 0,$(PYTEST_JOBS)),,-n $(PYTEST_JOBS) --dist loadfile)

# JupyterLab + headless Chromium: run the explorer notebook, move a slider, save docs/explorer.png; then
# open one slide deck from the file system, advance a slide, save docs/slides.png; then build the book,
# search it for "ledger", follow the first result, save docs/book.png. Installs selenium, and Debian's
# chromium + chromium-driver when missing (needs root or sudo).
test-browser: install-dev
	$(BIN)/python -m pip install -q -e ".[browser]"
	bash .ci/install_chromium
	$(BIN)/python tests/browser_smoke.py --notebook notebooks/11_explorer.ipynb --screenshot docs/explorer.png
	$(MAKE) slides
	$(BIN)/python tests/slides_smoke.py --deck build/slides/05_the_ledger.slides.html --screenshot docs/slides.png
	$(MAKE) book
	$(BIN)/python tests/book_smoke.py --book build/book --screenshot docs/book.png

# The book: build/book/ (open build/book/index.html), a static site of the executed notebooks and the
# exercises with their outputs, maths, plots, search and the glossary; nothing runs, nothing is fetched
# (docs/book/conf.py says why Sphinx + MyST-NB). .github/workflows/pages.yml publishes it.
book: install-dev
	rm -rf build/book
	$(BIN)/python -m sphinx -b html -c docs/book -q . build/book

# Re-execute every notebook in place (CPU, so committed outputs do not depend on the author's GPU),
# each cell's prints merged into one block (.ci/execute_notebooks.py says why not nbconvert).
# NOTEBOOKS="notebooks/02_blackboard_associativity.ipynb" make notebooks: just that one.
notebooks: install-dev
	$(BIN)/python .ci/execute_notebooks.py $(NOTEBOOKS)

# Regenerate the student notebooks in exercises/ from solutions/.
exercises: install-dev
	$(BIN)/python -m course_tools.exercise_builder

# The instructor guide (docs/instructor_guide.md) and the README's course map from the notebooks' lesson
# metadata, the schedules and the graders' known mistakes, then every notebook's header cells (badges, time,
# prerequisites, the Colab set-up); `python -m course_tools.workshop measure` re-times the notebooks first.
guide: install-dev
	$(BIN)/python -m course_tools.workshop guide
	$(BIN)/python -m course_tools.workshop headers

# The student copy: notebooks, exercises, course_lib and the parts of course_tools they call, the learner's
# docs, its own README and Makefile (course_tools/workshop/student_copy/), without solutions/ or the quiz
# key, as dist/linear-attention-course/ and its .zip.
release: install-dev
	$(BIN)/python -m course_tools.workshop release

# The student copy tested as a student gets it: built into build/student-copy, then its own `make test` run
# inside it with its own .venv (lessons under nbval, every exercise's stub graded). .ci/run calls it.
RELEASE_TEST_DIR ?= build/student-copy
test-release: install-dev
	$(BIN)/python -m course_tools.workshop release --out $(RELEASE_TEST_DIR)/linear-attention-course
	$(MAKE) -C $(RELEASE_TEST_DIR)/linear-attention-course test

# One reveal.js deck per notebook in build/slides/ (nbconvert), with reveal.js, RequireJS, MathJax and
# jQuery fetched once from npm into build/slides/vendor/: the decks open offline from the file system.
# Needs Node.js and npm (Debian: apt install nodejs npm).
slides: install-dev
	$(BIN)/python -m course_tools.workshop slides --out build/slides

# A workshop room on one server (docs/setup.md, "One shared server"), run as root. JupyterHub, the
# first-use authenticator and the idle culler (PyPI), configurable-http-proxy (npm), PyTorch and the
# student copy of the course all go to HUB_PREFIX, in an environment built from the system's Python
# (HUB_PYTHON) so that every participant's account can run it: .venv's Python may sit in a home only its
# owner can enter. Each `make hub` refreshes the student copy and the installed course_lib and course_tools; the
# participants' own copies (made at their first start) are kept.
HUB_PREFIX ?= /srv/linear-attention-course
HUB_PYTHON ?= /usr/bin/python3
PARTICIPANTS ?= participants.txt
HUB_IP ?= 127.0.0.1
HUB_PORT ?= 8000
HUB_MEM ?= 4G
HUB_CPUS ?= 1
HUB_IDLE_S ?= 3600
HUB_BIN := $(HUB_PREFIX)/venv/bin
HUB_STAMP := $(HUB_PREFIX)/venv/.installed-stamp

$(HUB_STAMP): pyproject.toml
	@test "$$(id -u)" = 0 || { echo "the hub needs root: it creates a Unix account per participant"; exit 1; }
	$(HUB_PYTHON) -m venv $(HUB_PREFIX)/venv
	$(HUB_BIN)/python -m pip install "$(TORCH_SPEC)" $(TORCH_PIP_ARGS) || $(HUB_BIN)/python -m pip install torch $(TORCH_PIP_ARGS)
	$(HUB_BIN)/python -m pip install ".[hub]"
	npm install --no-save --prefix $(HUB_PREFIX)/proxy configurable-http-proxy@5
	touch $@

hub-install: install-dev $(HUB_STAMP)
	$(BIN)/python -m course_tools.workshop release --out $(HUB_PREFIX)/course
	$(HUB_BIN)/python -m pip install --no-deps --force-reinstall .
	chmod -R a+rX $(HUB_PREFIX)/venv $(HUB_PREFIX)/course $(HUB_PREFIX)/proxy

# PARTICIPANTS: one user name per line, `name admin` for instructors (docs/setup.md). HUB_IP=0.0.0.0 opens it to
# the room's network (put TLS in front: docs/setup.md). Stop it with Ctrl-C (the servers stop with it).
hub: hub-install
	@test -f "$(PARTICIPANTS)" || { echo "PARTICIPANTS=$(PARTICIPANTS): no such file (one user name per line)"; exit 1; }
	install -d -m 0700 $(HUB_PREFIX)/state
	cd $(HUB_PREFIX)/state && WORKSHOP_PREFIX=$(HUB_PREFIX) WORKSHOP_STATE=$(HUB_PREFIX)/state \
	  WORKSHOP_PARTICIPANTS=$(abspath $(PARTICIPANTS)) WORKSHOP_IP=$(HUB_IP) WORKSHOP_PORT=$(HUB_PORT) \
	  WORKSHOP_MEM_LIMIT=$(HUB_MEM) WORKSHOP_CPU_LIMIT=$(HUB_CPUS) WORKSHOP_IDLE_TIMEOUT=$(HUB_IDLE_S) \
	  $(HUB_BIN)/jupyterhub -f $(CURDIR)/course_tools/workshop/jupyterhub_config.py

# The hub end to end (tests/test_hub.py): three participants, their servers, a notebook in one kernel,
# isolation, limits, first-use passwords, the culler; timings printed. Root only (.ci/run says when it skips).
test-hub: hub-install
	HUB_PREFIX=$(HUB_PREFIX) $(BIN)/python -m pytest tests/test_hub.py -s -p no:xdist

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis dist build

# The recall study (docs/measurements.md, "The recall study"): MQAR under its protocol and the text verdict,
# hours on 2 CPU cores; every finished run stays in benchmarks/results/recall_cpu.runs.jsonl, so it resumes.
recall: install-dev
	$(BIN)/python -m course_tools.recall --jobs 2

# Zoology's scale on one GPU (study.GPU, MQAR only): writes course_lib/results/recall_cuda.json and its plot.
# Four runs share the GPU (a tiny model's step is launch-bound). Estimated, not yet measured: ~8 min on an H200.
recall-gpu: install-dev
	$(BIN)/python -m course_tools.recall --device cuda --jobs 4 --part mqar
