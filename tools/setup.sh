#!/usr/bin/env bash
# Installs what a fresh machine lacks to build and test mslk (only the missing pieces), then
# builds the native library in place (mslk/lib/libmslk.so). Safe to run again: incremental.
# --deps-only: install the missing packages, do not build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

need=()
$PY -c "import torch" 2>/dev/null || need+=("torch>=2.10")
$PY -c "import pytest" 2>/dev/null || need+=(pytest)
$PY -c "import numpy" 2>/dev/null || need+=(numpy)
$PY -c "import hypothesis" 2>/dev/null || need+=(hypothesis)
$PY -c "import cutlass_library" 2>/dev/null || need+=(nvidia-cutlass)
command -v ninja >/dev/null || $PY -c "import ninja" 2>/dev/null || need+=(ninja)
if ((${#need[@]})); then
  echo "== installing: ${need[*]}"
  $PY -m pip install -q "${need[@]}"
fi
[ "${1:-}" = --deps-only ] || bash tools/build.sh
