#!/usr/bin/env bash
# Builds mslk with the CUDA kernels here (compiling needs no GPU; this machine's nvcc and torch
# match the H200 machine's: CUDA 13.0, torch 2.11+cu130), so a device call can skip the build:
#   bash tools/prebuild.sh        then the device call:
#   run(command="PREBUILT=1 bash tools/gpu_round.sh", carry=["mslk/lib", "build/test/cpp"])
# The library loads through torch.ops.load_library and has no Python in it, so the device's
# Python 3.12 takes it as is.
set -euo pipefail
cd "$(dirname "$0")/.."
MSLK_CUDA=ON MSLK_BUILD_TESTS=${MSLK_BUILD_TESTS:-ON} bash tools/build.sh
python3 - <<'PY'
import json, os
info = json.load(open("mslk/lib/build_info.json"))
assert info["variant"] == "cuda", f"not a CUDA build: {info}"
size = os.path.getsize("mslk/lib/libmslk.so") + sum(
    os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk("build/test/cpp") for f in fs)
print(f"prebuilt: {info}; carry mslk/lib + build/test/cpp = {size / 2**20:.1f} MiB (limit 64 MiB with the tree)")
PY
