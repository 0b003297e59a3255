#!/usr/bin/env bash
# Install the real llama.cpp OpenAI-compatible server (llama-cpp-python[server], pinned) into the venv.
# The wheel is built from source once with GGML_NATIVE=OFF (the native build segfaults on the first
# token on this CPU) and kept in ~/.cache/rlvr-wheels, so later runs only install the cached wheel.
# The tests start the server themselves (tests/llama_server.py); this script only installs it.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
VERSION="0.3.36"
CACHE="${RLVR_WHEEL_CACHE:-$HOME/.cache/rlvr-wheels}"
PY="$VENV/bin/python"

if "$PY" -c "import llama_cpp, uvicorn, sse_starlette, starlette_context, pydantic_settings, sys; \
sys.exit(llama_cpp.__version__ != '$VERSION')" 2>/dev/null; then
  exit 0
fi
mkdir -p "$CACHE"
wheel=$(ls "$CACHE"/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | head -1 || true)
if [ -z "$wheel" ]; then
  echo "building llama-cpp-python $VERSION from source (a few minutes, once)" >&2
  CMAKE_ARGS="-DGGML_NATIVE=OFF" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
    nice -n 10 "$PY" -m pip wheel -q --no-deps --no-binary llama-cpp-python -w "$CACHE" "llama-cpp-python==$VERSION"
  wheel=$(ls "$CACHE"/llama_cpp_python-"$VERSION"-*.whl | head -1)
fi
"$PY" -m pip install -q "${wheel}[server]"
