#!/usr/bin/env bash
# The reference wheel (mslk-cuda 1.1.0, cp312, torch 2.11) as the peer of bench_moe_layers.py.
#   prepare [WHEEL]   on a machine with PyPI: the wheel and the pure-Python packages its layers
#                     import (fairscale, pyre-extensions) into .whl/ref (git-ignored: carry it)
#   run [JSON] [ARGS] on the GPU machine (no network): install .whl/ref into $REF_DIR, then run
#                     ref_wheel_moe_layers.py in its own process with only that dir on PYTHONPATH
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=.whl/ref
case "${1:-}" in
  prepare)
    wheel=${2:-$(ls /tmp/refwheel312/mslk_cuda-1.1.0-cp312-*.whl | head -1)}
    mkdir -p "$dest"
    cp "$wheel" "$dest/"
    pip download --no-deps -d "$dest" pyre-extensions==0.0.32 typing-inspect==0.9.0 mypy-extensions==1.2.0
    pip wheel --no-deps --no-build-isolation -w "$dest" fairscale==0.4.13   # an sdist on PyPI: built here
    rm -f "$dest"/*.tar.gz
    du -sh "$dest"; ls "$dest" ;;
  run)
    out=${2:-ref_wheel_moe_layers.json}
    shift $(( $# < 2 ? $# : 2 ))
    dir=${REF_DIR:-/tmp/mslk_ref_wheel}
    rm -rf "$dir"
    pip install --quiet --no-deps --no-index --target "$dir" "$dest"/*.whl
    env -u PYTHONPATH PYTHONPATH="$dir" PYTHONUNBUFFERED=1 \
      python3 bench/moe/ref_wheel_moe_layers.py --wheel-dir "$dir" --out "$out" "$@" ;;
  *)
    echo "usage: $0 prepare [WHEEL] | run [JSON] [ref_wheel_moe_layers.py args]" >&2; exit 2 ;;
esac
