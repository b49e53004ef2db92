# unbroken — developer entry points.
#
#   make demo       set up .venv, then `unbroken check` on examples/*.py
#   make test       set up .venv, then the lint (ruff) and the whole test suite (slow cases too)
#   make lint       ruff on the repository (configuration in pyproject.toml)
#   make test-fast  the suite without tests marked `slow`
#   make bench      export time of unbroken vs torch.export(strict=True) on the model zoo
#   make corpus     unbroken vs torch.export strict/non-strict on ~120 real models and programs,
#                   one fresh process each (benchmarks/corpus.py; slow: 77 min with --jobs 2
#                   --single-call on 2 busy cores). Options through ARGS, e.g.
#                   make corpus ARGS="--jobs 2 --single-call", ARGS="--dynamic --jobs 2"
#   make docs       regenerate docs/graph-breaks.md from the graph-break catalogue
#
# The set-up is one stamp file: it reruns only when pyproject.toml changes or .venv is gone.
# torch==2.13.0 is installed first, on its own, so that the dependency range in pyproject.toml
# is already satisfied by the local CPU wheel and pip never reaches for another build.

PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.unbroken-setup-stamp

.PHONY: demo test test-fast lint bench corpus docs setup clean

setup: $(STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

# unbroken/__init__.py too: an editable install made before the package existed would treat
# `unbroken` as a namespace package until reinstalled.
$(STAMP): pyproject.toml $(wildcard unbroken/__init__.py) | $(PY)
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/unbroken check examples/*.py

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# The lint runs first: a red lint fails the build before the ~10 minutes of tests.
test: lint
	$(PY) -m pytest -q

test-fast: lint
	$(PY) -m pytest -q -m "not slow"

bench: $(STAMP)
	$(PY) benchmarks/export_time.py

# The report goes to benchmarks/results/corpus-<date>[-dynamic].{md,json}; ARGS adds options
# (--dynamic, --only bert,gpt2, --exporters unbroken,strict, --jobs N, --timeout S).
CORPUS_OUT = benchmarks/results/corpus-$(shell date -u +%Y-%m-%d)$(if $(findstring --dynamic,$(ARGS)),-dynamic,)
corpus: $(STAMP)
	$(PY) benchmarks/corpus.py $(ARGS) --json $(CORPUS_OUT).json --markdown $(CORPUS_OUT).md

docs: $(STAMP)
	$(PY) -W ignore::RuntimeWarning -m unbroken.frontend.graph_breaks --markdown > docs/graph-breaks.md.tmp
	mv docs/graph-breaks.md.tmp docs/graph-breaks.md

clean:
	rm -f $(STAMP)
	rm -rf build *.egg-info .pytest_cache
