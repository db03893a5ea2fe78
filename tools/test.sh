#!/usr/bin/env bash
# The README's test command: set-up + build, then the C++ unit tests (ctest) and the Python
# tests (pytest). On a machine with a GPU the same tests also run the CUDA kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" ${PYTHON:-python3} -m pytest -q test "$@"
