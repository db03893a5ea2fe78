#!/usr/bin/env bash
# Copy the CUTLASS headers of the nvidia-cutlass pip package into .deps/cutlass (git-ignored),
# so they travel to a GPU machine without network (name .deps in the device call's carry).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(${PYTHON:-python3} -c "import os, cutlass_library; print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source'))")
rm -rf .deps/cutlass && mkdir -p .deps/cutlass/tools/util
cp -r "$src/include" .deps/cutlass/ && cp -r "$src/tools/util/include" .deps/cutlass/tools/util/
du -sh .deps/cutlass
