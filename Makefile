# Phalanx: every target sets up what it needs on a fresh machine.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: install test lint bench bench-quick demo clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# torch first: the CPU build on local disk. Anything else pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	# ByzFL is a benchmark peer only; its declared torchvision would replace the CPU torch.
	$(PY) -m pip install --quiet --no-deps byzfl==0.0.11
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

bench: $(STAMP)
	$(PY) benchmarks/eval_distortion.py
	$(PY) benchmarks/bench_aggregation.py

bench-quick: $(STAMP)
	$(PY) benchmarks/eval_distortion.py --quick
	$(PY) benchmarks/bench_aggregation.py --quick

demo: $(STAMP)
	$(PY) benchmarks/eval_distortion.py --quick

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
