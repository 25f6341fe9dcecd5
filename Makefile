# Phalanx: every target sets up what it needs on a fresh machine.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# Two test processes: much of the suite waits on subprocesses (SuperLinks, Ray, Chromium).
PYTEST_ARGS ?= -n 2 --dist worksteal

FASHION_MNIST ?= /usr/share/datasets/fashion-mnist

.PHONY: install dataset test lint bench bench-quick demo clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# torch first: the CPU build on local disk. Anything else pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[server,dev,bench]'
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
	POSTGRES_PASSWORD=lint PHALANX_SECRET_KEY=lint PHALANX_SUPERLINK_PUBLIC_NAME=lint \
		docker-compose --env-file .env.example config --quiet
	$(VENV)/bin/hadolint docker/Dockerfile
	shellcheck docker/supernode-entrypoint.sh

bench: $(STAMP)
	$(PY) benchmarks/eval_distortion.py
	$(PY) benchmarks/eval_robustness.py --jobs 2
	$(PY) benchmarks/eval_proofs.py
	$(PY) benchmarks/eval_default_rule.py --jobs 2
	$(PY) benchmarks/eval_compression.py --jobs 2
	$(PY) benchmarks/eval_stragglers.py --jobs 2
	$(PY) benchmarks/eval_heterogeneity.py --jobs 2
	$(PY) benchmarks/eval_heterogeneity.py --jobs 2 --merge --no-flower \
		--partitions dirichlet-0.3 --qs 0,4 --seeds 2027,2028
	$(PY) benchmarks/eval_heterogeneity.py --jobs 2 --model cnn --no-flower \
		--partitions dirichlet-0.3 --qs 0,4
	$(PY) benchmarks/bench_scale.py
	$(PY) benchmarks/bench_scale.py --workers 3000 --transports in-process,flower
	$(PY) benchmarks/bench_scale.py --workers 10000 --transports in-process
	$(PY) benchmarks/bench_codec.py
	$(PY) benchmarks/bench_aggregation.py
	$(PY) benchmarks/bench_round.py
	$(PY) benchmarks/bench_api.py --workers 2

bench-quick: $(STAMP)
	$(PY) benchmarks/eval_distortion.py --quick
	$(PY) benchmarks/eval_robustness.py --quick
	$(PY) benchmarks/eval_proofs.py --quick
	$(PY) benchmarks/eval_default_rule.py --quick
	$(PY) benchmarks/eval_compression.py --quick
	$(PY) benchmarks/eval_stragglers.py --quick
	$(PY) benchmarks/eval_heterogeneity.py --quick
	$(PY) benchmarks/bench_scale.py --quick
	$(PY) benchmarks/bench_codec.py --quick
	$(PY) benchmarks/bench_aggregation.py --quick
	$(PY) benchmarks/bench_round.py --quick
	$(PY) benchmarks/bench_api.py --quick

# Debian's dataset-fashion-mnist, where the machine allows it (root or sudo with apt-get).
dataset:
	@if [ -n "$$PHALANX_DATASETS_DIR" ] || [ -d "$(FASHION_MNIST)" ]; then exit 0; fi; \
	if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist; \
	elif command -v apt-get >/dev/null && command -v sudo >/dev/null; then \
		sudo apt-get update -qq && sudo apt-get install -y -qq dataset-fashion-mnist; \
	else \
		echo "Fashion-MNIST is missing: install Debian's dataset-fashion-mnist," \
			"or set PHALANX_DATASETS_DIR to a folder with its IDX files." >&2; exit 1; \
	fi

demo: $(STAMP) dataset
	$(VENV)/bin/phalanx demo

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
