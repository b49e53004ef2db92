# unbroken — developer entry points.
#
#   make demo       set up the venv of the cell, then `unbroken check` on examples/*.py, and
#                   `unbroken fix` on a model with a graph break (the verified patch, the export)
#   make test       set up the venv, then the lint (ruff) and the whole test suite (slow cases
#                   included, heavy ones not); `--durations=25` lists the slowest tests
#   make lint       ruff on the repository (configuration in pyproject.toml)
#   make test-fast  the suite without tests marked `slow`
#   make test-heavy only the tests marked `heavy` (the costliest toolchain cases, ~5 min)
#   make test-slice the representative slice every Python x torch cell runs (tests marked
#                   `matrix`: CPython parity, the opcode table, SymNode and dynamic shapes, the
#                   tool chain, the zoo, 12 transformers models, soundness draws, the CI gate,
#                   save/load, seed examples, ExportDB; ~3 min; the list is in pyproject.toml)
#   make test-matrix  `make demo` and test-slice on every cell of ci/cells.txt, one at a time
#                   (ci/matrix), then a table of the results; CELLS="3.12-2.14.1 ..." runs only
#                   those, KEEP=1 keeps the venvs it builds (~5 GB each), REPORT=FILE writes the
#                   table as Markdown
#   make bench      export time of unbroken vs torch.export strict and non-strict, interleaved
#                   in one process (medians, spread, a FakeTensorMode forward as the floor,
#                   fresh-process columns), on the zoo and six Hugging Face models with
#                   attention masks (the JSON and Markdown of the run:
#                   benchmarks/results/export-time-<date>-<cell>.{json,md})
#   make corpus     unbroken vs torch.export strict/non-strict on ~120 real models and programs,
#                   one fresh process each (benchmarks/corpus.py; slow: 77 min with --jobs 2
#                   --single-call on 2 busy cores). Options through ARGS, e.g.
#                   make corpus ARGS="--jobs 2 --single-call", ARGS="--dynamic --jobs 2";
#                   reports: benchmarks/results/corpus-<date>-<cell>[-dynamic].{md,json}
#   make fixes      the benchmark of real graph breaks (benchmarks/fixes/, 44 cases from
#                   transformers, the torch.export tutorial, ExportDB and GitHub issues): what
#                   torch.export, draft_export and unbroken find, and which fixes `unbroken fix`
#                   verifies (~10 min); report: benchmarks/results/fixes-<date>.{md,json}
#   make docs       regenerate docs/graph-breaks.md from the graph-break catalogue
#
# A cell is a Python version and a torch release: `make setup PYTHON=3.12 TORCH=2.14.1`
# creates `.venv-3.12-torch2.14.1`; the default cell (PYTHON=3.11 TORCH=2.13.0) is `.venv`,
# with the torch 2.13.0 CPU wheel that lies on disk. Every target takes the cell the same way
# (`make test-slice PYTHON=3.13 TORCH=2.15.0`), or a venv directly (`make bench VENV=...`).
# The set-up is one stamp file per venv: it reruns only when pyproject.toml changes or the
# venv is gone. torch is installed first, on its own and pinned (ci/torch-<release>.txt), so
# that the dependency range in pyproject.toml is already satisfied and pip never reaches for
# another build. A machine-wide pip cap on torch releases (a constraint file in pip's
# configuration) is lifted for the install (PIP_CONSTRAINT=/dev/null): the pin file decides.

PYTHON ?= 3.11
TORCH  ?= 2.13.0
ifeq ($(PYTHON)-$(TORCH),3.11-2.13.0)
VENV   ?= .venv
else
VENV   ?= .venv-$(PYTHON)-torch$(TORCH)
endif
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.unbroken-setup-stamp
PYTEST_ARGS ?=

.PHONY: demo test test-fast test-heavy test-slice test-matrix lint bench corpus fixes docs setup \
	clean \
	venv-path

setup: $(STAMP)

# ci/find-python prints the interpreter of a Python version (python3.12 on PATH, or pyenv's).
$(PY):
	"$$(ci/find-python $(PYTHON))" -m venv $(VENV)

# unbroken/__init__.py too: an editable install made before the package existed would treat
# `unbroken` as a namespace package until reinstalled.
$(STAMP): pyproject.toml $(wildcard unbroken/__init__.py) | $(PY)
	PIP_CONSTRAINT=/dev/null $(PY) -m pip install --quiet -r ci/torch-$(TORCH).txt
	PIP_CONSTRAINT=/dev/null $(PY) -m pip install --quiet -e '.[dev]' -c ci/torch-$(TORCH).txt
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/unbroken check examples/*.py
	$(VENV)/bin/unbroken fix examples/broken/fixable.py -k GatedResidual

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# The lint runs first: a red lint fails the build before the ~10 minutes of tests.
test: lint
	$(PY) -m pytest -q --durations=25 $(PYTEST_ARGS)

test-slice: $(STAMP)
	$(PY) -m pytest -q -m "matrix and not heavy" --durations=10 $(PYTEST_ARGS)

test-matrix:
	ci/matrix $(CELLS) $(if $(KEEP),--keep,) $(if $(REPORT),--report $(REPORT),)

# The venv of the cell, for scripts (ci/matrix): `make -s venv-path PYTHON=3.12 TORCH=2.14.1`.
venv-path:
	@echo $(VENV)

test-fast: lint
	$(PY) -m pytest -q -m "not slow and not heavy"

test-heavy: $(STAMP)
	$(PY) -m pytest -q -m heavy

# Result files name the cell they were measured on (py3.12-torch2.14.1), read from the venv
# itself so that VENV=... is named right too; the files record Python and torch inside as well.
CELL_OF_VENV = $(PY) -c 'import sys; from importlib.metadata import version; \
	print("py%d.%d-torch%s" % (*sys.version_info[:2], version("torch").split("+")[0]))'
TODAY = $(shell date -u +%Y-%m-%d)

# The table goes to the console and benchmarks/results/export-time-<date>-<cell>.md, every
# run's times to the .json beside it; ARGS adds options (--runs 3, --models mlp,hf_gpt2,
# --modes auto,dims, --process-runs 0).
bench: $(STAMP)
	cell=$$($(CELL_OF_VENV)) && \
	$(PY) benchmarks/export_time.py $(ARGS) --json benchmarks/results/export-time-$(TODAY)-$$cell.json \
		--markdown benchmarks/results/export-time-$(TODAY)-$$cell.md

# The report goes to benchmarks/results/corpus-<date>-<cell>[-dynamic].{md,json}; ARGS adds
# options (--dynamic, --only bert,gpt2, --exporters unbroken,strict, --jobs N, --timeout S).
CORPUS_OUT = benchmarks/results/corpus-$(TODAY)-$$cell$(if $(findstring --dynamic,$(ARGS)),-dynamic,)
corpus: $(STAMP)
	cell=$$($(CELL_OF_VENV)) && \
	$(PY) benchmarks/corpus.py $(ARGS) --json $(CORPUS_OUT).json --markdown $(CORPUS_OUT).md

# ARGS adds options (--only hf_detr_clamp_nonfinite,tutorial_bad1_branch, --timeout S).
fixes: $(STAMP)
	$(PY) benchmarks/fixes_bench.py $(ARGS) --markdown benchmarks/results/fixes-$(TODAY).md \
		--json benchmarks/results/fixes-$(TODAY).json

docs: $(STAMP)
	$(PY) -W ignore::RuntimeWarning -m unbroken.symbolic.diagnostics.catalogue --markdown > docs/graph-breaks.md.tmp
	mv docs/graph-breaks.md.tmp docs/graph-breaks.md

clean:
	rm -f $(STAMP)
	rm -rf build *.egg-info .pytest_cache
