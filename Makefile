# Each target sets itself up: a fresh clone needs only `make run` or `make test`.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
MODEL  ?= default

.PHONY: venv run test bench model clean-venv gpu gpu-swap

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	if [ -f $(VENV)/.gpu ]; then $(MAKE) --no-print-directory gpu-swap; fi
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

# The GPU (NVIDIA driver >= 580): the CUDA 13 / cuDNN 9 runtime wheels (the `gpu` extra), then
# onnxruntime-gpu in place of the CPU onnxruntime. The two wheels install one module and break
# each other side by side, so both are removed before the GPU one goes in; the marker makes
# every later re-install of the venv swap again. `edge-agent doctor` then shows the device.
ORT_GPU ?= onnxruntime-gpu==1.31.1

gpu: $(STAMP)
	$(PY) -m pip install --quiet -e '.[gpu,dev]'
	$(MAKE) --no-print-directory gpu-swap
	touch $(VENV)/.gpu
	$(VENV)/bin/edge-agent doctor --no-index || true

gpu-swap:
	$(PY) -m pip uninstall --quiet -y onnxruntime onnxruntime-gpu
	$(PY) -m pip install --quiet --no-deps '$(ORT_GPU)'
