#!/usr/bin/env bash
# Builds the mslk wheel into dist/ (reusing the in-place build folder, so after tools/build.sh it
# only relinks), installs it into a scratch folder, and checks the installed package from outside
# the source tree: its version, its native library, no
# test or benchmark files, and one CPU op. Prints the wheel's name and size.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
BUILD_DIR=${BUILD_DIR:-build}
$PY -c "import scikit_build_core" 2>/dev/null || $PY -m pip install -q "scikit-build-core>=0.10"
rm -rf dist
# The in-place build's test targets stay configured, so the folder stays valid for tools/build.sh.
MSLK_CUDA=${MSLK_CUDA:-AUTO} $PY -m pip wheel . --no-build-isolation --no-deps -q -w dist \
  -Cbuild-dir="$BUILD_DIR" -Ccmake.define.MSLK_BUILD_TESTS=ON
# scikit-build-core left its settings in the folder's cache (SKBUILD*: the wheel's install layout,
# no tests); drop them so tools/build.sh builds in place again (a relink, nothing recompiles).
cmake -S . -B "$BUILD_DIR" -U "SKBUILD*" -DCMAKE_INSTALL_PREFIX=/usr/local >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" >/dev/null
whl=$(realpath dist/mslk-*.whl)
# Installed into a scratch folder (pip --target: no virtual environment module needed) and imported
# from elsewhere, with only that folder added to the path (torch comes from the caller's install).
dest=$(mktemp -d)
$PY -m pip install -q --no-deps --target "$dest/site" "$whl"
(cd "$dest" && PYTHONPATH="$dest/site" $PY - "$whl" "$dest/site" <<'PY'
import os, sys, zipfile
import torch
import mslk
from mslk._version import __version__

names = zipfile.ZipFile(sys.argv[1]).namelist()
assert not [n for n in names if n.startswith(("test/", "bench/", "tools/")) or "__pycache__" in n], names
assert "mslk/lib/libmslk.so" in names, "the native library is missing from the wheel"
assert os.path.dirname(mslk.__file__).startswith(sys.argv[2]), f"imported {mslk.__file__}, not the installed package"
x = torch.randn(5, 64, dtype=torch.bfloat16)
xq, s = torch.ops.triton.quantize_fp8_row(x)
err = (xq.float() * s[:, None] - x.float()).abs().max() / x.float().abs().max()
assert err < 0.07, err
print(f"wheel: {os.path.basename(sys.argv[1])}, {os.path.getsize(sys.argv[1]) / 2**20:.1f} MiB, "
      f"{len(names)} files; installed mslk {__version__} imports and runs a CPU op")
PY
)
rm -rf "$dest"
