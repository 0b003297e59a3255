#!/usr/bin/env bash
# CI: make a Docker engine answer and the rlvr sandbox images exist, offline if need be.
# Idempotent: installs only what is missing, starts dockerd only if no engine answers,
# and builds the image only if its tag (a hash of the harness) is not there yet.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${VENV:-.venv}/bin/python"

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi; }

engine_answers() { docker info >/dev/null 2>&1; }

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
if [ "${#missing[@]}" -gt 0 ]; then
    echo "ci/docker: installing ${missing[*]}"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! engine_answers; then
    echo "ci/docker: starting dockerd"
    as_root sh -c 'nohup dockerd >/tmp/rlvr-dockerd.log 2>&1 &'
    for _ in $(seq 1 60); do
        engine_answers && break
        sleep 1
    done
    if ! engine_answers; then
        echo "ci/docker: dockerd did not come up; last log lines:" >&2
        tail -n 20 /tmp/rlvr-dockerd.log >&2 || true
        exit 1
    fi
fi

# The image build imports rlvr, so the virtualenv must exist first (.ci/run pins TORCH_SPEC).
if [ ! -x "$PY" ]; then
    make install TORCH_SPEC="${TORCH_SPEC:?set TORCH_SPEC to a pinned torch}"
fi
"$PY" -m rlvr sandbox build
"$PY" -m rlvr sandbox check
# The image with the C, C++, Java, JavaScript, Go and Rust toolchains (tests/test_sandbox_languages.py).
# debootstrap keeps its .debs in $RLVR_DEB_CACHE (default ~/.cache/rlvr/debs): keep that folder
# between runs and a rebuild downloads nothing.
"$PY" -m rlvr sandbox build --languages
