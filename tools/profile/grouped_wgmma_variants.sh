# One device call: the wgmma variants' GPU tests, then their timings (prebuilt lib carried in .ab/).
set -u
mkdir -p mslk/lib && xz -dc .ab/exp.so.xz > mslk/lib/libmslk.so && cp .ab/exp_build_info.json mslk/lib/build_info.json
export PYTHONPATH=$PWD MSLK_TEST_TIMEOUT=60
nvidia-smi --query-gpu=name --format=csv,noheader
for v in 0 1 2 3 4; do echo "variant $v:"; MSLK_FP8_GROUPED_WGMMA_VARIANT=$v timeout 60 python3 -m pytest -q -x test/gemm/test_fp8_blockwise.py -k "wgmma" 2>&1 | tail -2; done
timeout 240 python3 tools/profile/grouped_wgmma_variants.py 2>&1
# Nsight Compute on variants 0 and 1 and the CUTLASS 1x1 row (same tile), E 8 x 2048 uniform:
# warp stalls by reason and by SASS opcode (ncu_source_summary.py), tensor pipe and L2 figures.
R=${OUT:-out}/ncu; mkdir -p "$R"
for t in wgmma0 wgmma1 cutlass-1x1; do
  case $t in wgmma?) tgt=fp8g-wgmma; export MSLK_FP8_GROUPED_WGMMA_VARIANT=${t#wgmma};; *) tgt=fp8g-$t;; esac
  timeout 90 ncu --clock-control none --nvtx --nvtx-include "prof/" --section SpeedOfLight --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section SourceCounters \
    --metrics sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum.per_second \
    -o "$R/$t" python3 tools/profile/ncu_targets.py "$tgt" >"$R/$t.log" 2>&1
  unset MSLK_FP8_GROUPED_WGMMA_VARIANT
  ncu -i "$R/$t.ncu-rep" --page details >"$R/$t.txt" 2>&1
  ncu -i "$R/$t.ncu-rep" --page source --print-source sass --csv 2>/dev/null | gzip >"$R/$t.csv.gz"
  python3 tools/profile/ncu_source_summary.py "$R/$t.csv.gz"
  grep -E "Duration|pipe_tensor|lts__t_bytes|L2 Hit|DRAM Throughput" "$R/$t.txt"
  rm -f "$R/$t.ncu-rep"
done
tar czf "${OUT:-out}/ncu.tgz" -C "${OUT:-out}" ncu && rm -rf "$R"
