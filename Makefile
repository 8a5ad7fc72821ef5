# Each target sets itself up: a fresh clone needs only `make run` or `make test`.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
MODEL  ?= default

.PHONY: venv run test bench model clean-venv

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

models/$(MODEL)/manifest.json: | $(STAMP)
	$(VENV)/bin/edge-agent model install-default

model: models/$(MODEL)/manifest.json

run: $(STAMP) models/$(MODEL)/manifest.json
	$(VENV)/bin/edge-agent serve

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

# llama.cpp for the side-by-side column, built for this CPU but without AMX tiles: some
# VMs advertise AMX without enabling it, and a native build then dies with SIGILL.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=ON -DCMAKE_C_FLAGS='-mno-amx-tile -mno-amx-int8 -mno-amx-bf16' -DCMAKE_CXX_FLAGS='-mno-amx-tile -mno-amx-int8 -mno-amx-bf16'

bench: $(STAMP) models/$(MODEL)/manifest.json
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip install --quiet -e '.[bench]' || echo "llama-cpp-python not installed: llama.cpp column skipped"
	$(VENV)/bin/edge-agent bench

clean-venv:
	rm -rf $(VENV)
