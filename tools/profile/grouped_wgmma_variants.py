"""Times the grouped FP8 wgmma kernel's variants (MSLK_FP8_GROUPED_WGMMA_VARIANT 0-4) beside the
CUTLASS pick and its 1x1 row on the grouped benchmark's shapes; '(DIFF)' marks an output that is not
bit-identical to the default's. Usage (GPU): python3 tools/profile/grouped_wgmma_variants.py"""
import os, torch, mslk  # noqa
from bench.common import env_var, time_ms
from bench.gemm.bench_bf16_grouped import sizes_for
FP8 = torch.float8_e4m3fn
for E, tpe, N, K in [(8, 2048, 4096, 7168), (16, 512, 2048, 5120), (128, 64, 2048, 7168)]:
    for skewed in (False, True):
        sizes = sizes_for(E, tpe, skewed); M, kb = sum(sizes), K // 128
        xq = (torch.randn(M, K, device="cuda") * 4).to(FP8); wq = (torch.randn(E, N, K, device="cuda") * 4).to(FP8)
        ms = torch.tensor(sizes, dtype=torch.int64, device="cuda")
        xs = torch.rand(M, kb, device="cuda") * 0.01 + 1e-3; ws = torch.rand(E, kb, N // 128, device="cuda") * 0.01 + 1e-3
        op = torch.ops.mslk.f8f8bf16_groupwise_grouped
        def run(row, v):
            def f(*a):
                with env_var("MSLK_FP8_BLOCKWISE_GROUPED_CONFIG", row), env_var("MSLK_FP8_GROUPED_WGMMA_VARIANT", v):
                    return op(*a)
            return f
        fns = {"default": run(None, None), "cutlass1x1": run("2", None), "wgmma0": run("3", "0"), "wgmma1": run("3", "1"), "wgmma2": run("3", "2"), "wgmma3": run("3", "3"), "wgmma4": run("3", "4")}
        ref = fns["default"](xq, wq, xs, ws, ms)
        eq = {k: bool(torch.equal(f(xq, wq, xs, ws, ms), ref)) for k, f in fns.items()}
        best = {k: 1e9 for k in fns}
        for _ in range(2):
            for k, f in fns.items():
                best[k] = min(best[k], time_ms(f, [(xq, wq, xs, ws, ms)]))
        print(f"E{E} tpe{tpe} {'skewed' if skewed else 'uniform'}: " + ", ".join(f"{k} {v*1e3:.1f} us{'' if eq[k] else ' (DIFF)'}" for k, v in best.items()), flush=True)
        del xq, wq; torch.cuda.empty_cache()
