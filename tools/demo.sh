#!/usr/bin/env bash
# The README's main job: set-up + build, then the quick-start demo (GPU if present, else CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" ${PYTHON:-python3} tools/demo.py
