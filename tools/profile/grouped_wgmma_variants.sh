# One device call: the wgmma variants' GPU tests, then their timings (prebuilt lib carried in .ab/).
set -u
mkdir -p mslk/lib && xz -dc .ab/exp.so.xz > mslk/lib/libmslk.so && cp .ab/exp_build_info.json mslk/lib/build_info.json
export PYTHONPATH=$PWD MSLK_TEST_TIMEOUT=60
nvidia-smi --query-gpu=name --format=csv,noheader
for v in 0 1 2 3 4; do echo "variant $v:"; MSLK_FP8_GROUPED_WGMMA_SMEM_SCALES=$v timeout 60 python3 -m pytest -q -x test/gemm/test_fp8_blockwise.py -k "wgmma" 2>&1 | tail -2; done
timeout 240 python3 tools/profile/grouped_wgmma_variants.py 2>&1
