#!/usr/bin/env bash
# Configure and build mslk in place with every core. Env: MSLK_CUDA=AUTO|ON|OFF,
# MSLK_CUDA_ARCHS (default 90a), MSLK_CUTLASS_DIR, BUILD_DIR (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
BUILD_DIR=${BUILD_DIR:-build}
export PATH="$PATH:/usr/local/cuda/bin:$($PY -c 'import ninja,os;print(os.path.dirname(ninja.__file__)+"/data/bin")' 2>/dev/null || true)"
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD_DIR" "${gen[@]}" -DMSLK_PYTHON="$(command -v $PY)" \
    -DMSLK_CUDA="${MSLK_CUDA:-AUTO}" -DMSLK_BUILD_TESTS="${MSLK_BUILD_TESTS:-ON}" -DMSLK_CUDA_ARCHS="${MSLK_CUDA_ARCHS:-90a}" \
    ${MSLK_CUTLASS_DIR:+-DMSLK_CUTLASS_DIR="$MSLK_CUTLASS_DIR"}
fi
cmake --build "$BUILD_DIR" -j "$(nproc)"
