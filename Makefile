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

# setup prepares what a first start would otherwise do before it is ready (the embedding export), and
# rebuilds a default bundle that an older builder made; once done it only checks (under a second)
run: $(STAMP) models/$(MODEL)/manifest.json
	$(VENV)/bin/edge-agent setup
	$(VENV)/bin/edge-agent serve

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

# llama.cpp for the side-by-side rows: its own C++ tools (llama-bench, llama-batched-bench,
# llama-quantize, llama-perplexity), built once from the pinned llama-cpp-python sdist's vendored
# source into .cache/llama.cpp (about 8 minutes on 2 cores; see scripts/build-llama-cpp).
bench: $(STAMP) models/$(MODEL)/manifest.json
	PY=$(PY) scripts/build-llama-cpp || echo "llama.cpp's tools not built: llama.cpp rows skipped"
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
