# The README's two commands: `make train` and `make test`. Each sets up everything it needs on a
# fresh machine (system library, .venv, torch, dependencies, the compiled ops) and is a no-op for
# any step whose inputs did not change.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
TORCH_VERSION ?= 2.13.0
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
# Pins the torch that is installed (2.13.0+cpu here, a CUDA build on a GPU machine) for every later
# install, so no dependency can pull another torch.
TORCH_PIN := $(VENV)/torch-constraint.txt
DEPS_STAMP := $(VENV)/.deps-installed
EXT_STAMP := $(VENV)/.extension-built
CSRC := $(shell find csrc -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh')

.PHONY: setup build test train bench gpu-check clean

setup: $(DEPS_STAMP)

$(DEPS_STAMP): pyproject.toml requirements.lock
	@# open3d (the pointcloud extra, pulled in by the test extra below) needs libusb at import time;
	@# the machines run as root with Debian's apt. A plain `pip install contactnet` needs neither.
	@if ! ldconfig -p | grep -q 'libusb-1.0.so.0'; then \
		if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
			echo "installing libusb-1.0-0 (needed by open3d)"; \
			(apt-get install -y -qq libusb-1.0-0 >/dev/null 2>&1 || \
			 (apt-get update -qq >/dev/null && apt-get install -y -qq libusb-1.0-0 >/dev/null)); \
		else echo "warning: libusb-1.0 is missing and cannot be installed here; open3d will not import"; fi; \
	fi
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -c "import torch" 2>/dev/null || $(PIP) install -q "torch==$(TORCH_VERSION)"
	@echo "torch==$$($(PY) -c 'import torch; print(torch.__version__)' 2>/dev/null)" > $(TORCH_PIN)
	$(PIP) install -q -c $(TORCH_PIN) -c requirements.lock setuptools wheel ninja
	$(PIP) install -q -c $(TORCH_PIN) -c requirements.lock --no-build-isolation -e ".[test]"
	@touch $(EXT_STAMP) $@

# Incremental rebuild of contactnet._C (ninja, only changed sources) when csrc/ changes.
$(EXT_STAMP): $(DEPS_STAMP) $(CSRC) setup.py
	MAX_JOBS=$$(nproc) $(PY) setup.py -q build_ext --inplace
	@touch $@

build: $(EXT_STAMP)

test: build
	@# One worker per core (pytest-xdist): the suite is many independent tests, most of them
	@# single-threaded Python; tests/conftest.py gives each worker its share of the cores.
	$(PY) -m pytest -q -n auto tests

# The main job: generate the built-in procedural dataset if it is missing (resuming a partial one),
# train LOCC on it, and print test accuracy on known and unknown objects next to two baselines.
train: build
	$(PY) train.py +experiment=quickstart

bench: build
	@for b in triangle_distance mesh_contacts ipc_barrier data_generation inference planning stepper; do \
		echo "== benchmarks.$$b"; $(PY) -m benchmarks.$$b; done

# On a CUDA machine: build the extension with its CUDA kernels, run the CUDA and CPU-vs-CUDA tests and
# every benchmark's GPU rows; writes outputs/gpu_check/gpu_check.{json,log}. Installs nothing (a lent
# GPU machine has torch, nvcc and pytest, no network), so it uses .venv's python when there is one,
# else $(PYTHON). Without CUDA it says so and exits 0. GPU_CHECK_ARGS=--dry-run prints the steps.
GPU_PY := $(if $(wildcard $(PY)),$(PY),$(PYTHON))
gpu-check:
	$(GPU_PY) -m benchmarks.gpu_check $(GPU_CHECK_ARGS)

clean:
	rm -rf build $(VENV) contactnet/*.so *.egg-info
