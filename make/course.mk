# What every copy of the course needs to set itself up: the venv, PyTorch, course_lib and JupyterLab.
# Included by the repository's Makefile and by the student copy's (course_tools/workshop/student_copy/),
# so the two cannot drift apart. The course's two set-up commands are `make lab` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Installed first, before course_lib's own range (torch>=2.2) is resolved. On PyPI this is the
# CUDA build on Linux and the MPS build on macOS; on machines with a local CPU wheel it is that
# wheel. Override for another build, e.g. `make lab TORCH_SPEC=torch`.
TORCH_SPEC ?= torch==2.13.0
# TORCH=cpu takes that release from PyTorch's CPU-only index: for torch 2.13.0 on Linux x86_64 a 192 MB
# wheel, where PyPI's CUDA build and the NVIDIA wheels it requires are 2.7 GB (README, "Set-up"; docs/setup.md, "PyTorch builds").
TORCH ?= default
TORCH_INDEX_cpu := https://download.pytorch.org/whl/cpu
TORCH_PIP_ARGS = $(if $(filter default cpu,$(TORCH)),,$(error TORCH=$(TORCH): use TORCH=cpu or TORCH=default))$(if $(TORCH_INDEX_$(TORCH)),--index-url $(TORCH_INDEX_$(TORCH)))
KERNEL_NAME ?= linear-attention-course
# Extra JupyterLab flags, e.g. LAB_ARGS="--no-browser --port 8890". As root (containers) --allow-root is
# added whatever LAB_ARGS says: without it the server refuses to start.
LAB_ARGS ?=
ROOT_ARGS = $(if $(filter 0,$(shell id -u)),--allow-root)
STAMP := $(VENV)/.installed-stamp
DEV_STAMP := $(VENV)/.installed-dev-stamp

# The venv is made when bin/pip is missing, so a half-made one (Debian/Ubuntu without python3-venv makes
# bin/python, then stops at ensurepip) is made again (--clear); if that fails it is removed, not left behind.
$(BIN)/pip:
	@$(PYTHON) -m venv --clear $(VENV) && $(BIN)/python -m pip --version >/dev/null 2>&1 || { \
	  test ! -f $(VENV)/pyvenv.cfg || rm -rf $(VENV); \
	  echo "make: $(PYTHON) could not make $(VENV) with pip: Python's venv module or ensurepip is missing."; \
	  echo "make: on Debian/Ubuntu run 'sudo apt install python3-venv' (or python3.11-venv), then make lab again."; \
	  exit 1; }

# `make install` (and `make lab`): what the notebooks and exercises need. `make install-dev` adds the
# extras in DEV_EXTRAS: `test` and `instructor` (pytest, nbval, hypothesis; nbclient, nbformat) here, and
# the repository's Makefile adds `book` (Sphinx, MyST-NB: tests/test_book.py builds the book).
DEV_EXTRAS ?= test,instructor
$(STAMP): pyproject.toml | $(BIN)/pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install "$(TORCH_SPEC)" $(TORCH_PIP_ARGS) || $(BIN)/python -m pip install torch $(TORCH_PIP_ARGS)
	$(BIN)/python -m pip install -e .
	touch $@

$(DEV_STAMP): $(STAMP)
	$(BIN)/python -m pip install -e ".[$(DEV_EXTRAS)]"
	touch $@

install: $(STAMP)

install-dev: $(DEV_STAMP)

# The server's root is the repository (not notebooks/), so exercises/, solutions/, docs/ and the
# notebooks' ../exercises/ links are reachable; JupyterLab opens 00_start_here inside it.
# tests/test_lab.py starts the server with this same line (read through `make -n lab`).
# The notebooks name the `python3` kernel, which is .venv's own Python when JupyterLab runs from .venv,
# so the launcher shows one kernel; `make kernel` registers .venv for a Jupyter started elsewhere.
lab: install
	$(BIN)/jupyter lab --ServerApp.root_dir=. $(ROOT_ARGS) $(LAB_ARGS) notebooks/00_start_here.ipynb

# For a Jupyter that does not run from .venv (VS Code, a system JupyterLab): .venv's Python as a named
# kernel in the user's kernel folder, picked under Kernel -> Change Kernel. `make lab` does not need it.
kernel: install
	$(BIN)/python -m ipykernel install --user --name $(KERNEL_NAME) --display-name "Linear Attention (course)"
