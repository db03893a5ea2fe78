#!/usr/bin/env bash
# Builds mslk with the CUDA kernels here (compiling needs no GPU; this machine's nvcc and torch
# match the H200 machine's: CUDA 13.0, torch 2.11+cu130), so a device call can skip the build:
#   bash tools/prebuild.sh        then the device call:
#   run(command="PREBUILT=1 bash tools/gpu_round.sh", carry=[".prebuilt"])
# The CUDA library (about 95 MB) is over the device tool's 64 MiB carry limit, so it travels
# xz-compressed (about 10 MB) in the git-ignored .prebuilt/ with the C++ test binaries;
# gpu_round.sh unpacks them.
# The library loads through torch.ops.load_library and has no Python in it, so the device's
# Python 3.12 takes it as is.
set -euo pipefail
cd "$(dirname "$0")/.."
MSLK_CUDA=ON MSLK_BUILD_TESTS=${MSLK_BUILD_TESTS:-ON} bash tools/build.sh
python3 - <<'PY'
import json
info = json.load(open("mslk/lib/build_info.json"))
assert info["variant"] == "cuda", f"not a CUDA build: {info}"
PY
rm -rf .prebuilt && mkdir -p .prebuilt
xz -T0 -3 -c mslk/lib/libmslk.so >.prebuilt/libmslk.so.xz
cp mslk/lib/build_info.json .prebuilt/
if [ -d build/test/cpp ]; then
  (cd build/test/cpp && tar cJf ../../../.prebuilt/cpp_tests.tar.xz mslk_test_*)
fi
echo "prebuilt: $(cat .prebuilt/build_info.json | tr -d '\n'); carry .prebuilt = $(du -sm .prebuilt | cut -f1) MiB (limit 64 MiB with the tree)"
