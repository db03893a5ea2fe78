"""MoE routing and token movement on the GPU: mslk vs plain torch, and vs copy bandwidth.

index_shuffling at T=16384, E=128, top_k=4 (target < 20 us); gather_scale_dense_tokens and
scatter_add_dense_tokens at T=16384, D=5120 bf16, top_k=4 (target >= 70% of copy bandwidth).
Prints a table and writes it (with date and device) to --out.
"""

import argparse
from pathlib import Path

import torch

import mslk.moe as moe
from bench.common import copies_to_exceed_l2, copy_bandwidth_tbs, time_graph_ms, time_ms, write_results


def torch_index_shuffling(scores, top_k):
    T, E = scores.shape
    idx = torch.topk(scores, top_k, dim=1).indices.flatten()
    order = torch.argsort(idx, stable=True)
    counts = torch.bincount(idx, minlength=E)
    return counts, idx[order].int(), (order // top_k).int()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("results_moe_routing.md"))
    args = ap.parse_args()
    T, E, K, D = 16384, 128, 4, 5120
    bw = copy_bandwidth_tbs()
    rows = []

    n = copies_to_exceed_l2(T * E * 2)
    sets = [(torch.randn(T, E, device="cuda", dtype=torch.bfloat16),) for _ in range(n)]
    t_ours = time_ms(lambda s: moe.index_shuffling(s, top_k=K), sets)
    t_torch = time_ms(lambda s: torch_index_shuffling(s, K), sets)
    rows.append(["index_shuffling T16384 E128 k4", f"{t_ours * 1e3:.1f} us", f"{t_torch * 1e3:.1f} us",
                 f"{t_torch / t_ours:.2f}x", "-"])
    # Eager calls queued back to back still pay the host's dispatch, allocation and cooperative
    # launch per call when the kernel is shorter than that: the device time comes from a CUDA graph
    # (torch's version cannot be captured: bincount reads its maximum back to the host).
    t_graph = time_graph_ms(lambda s: moe.index_shuffling(s, top_k=K), sets)
    rows.append(["index_shuffling T16384 E128 k4, CUDA graph (device time)", f"{t_graph * 1e3:.1f} us", "-",
                 "-", "-"])  # no speed-up: torch's eager time is not a device time

    x = torch.randn(T, D, device="cuda", dtype=torch.bfloat16)
    scores = torch.rand(T, E, device="cuda", dtype=torch.bfloat16)
    counts, ei, ti = moe.index_shuffling(scores, top_k=K)
    A = T * K
    gbytes = 2 * A * D * 2  # read + write of A rows
    g_sets = [(x, ti, ei, scores)]
    t_g = time_ms(lambda *a: moe.gather_scale_dense_tokens(*a), g_sets)
    t_gt = time_ms(lambda x, ti, ei, s: x[ti.long()] * s[ti.long(), ei.long()][:, None], g_sets)
    rows.append([f"gather_scale_dense_tokens A={A} D={D}", f"{t_g * 1e3:.1f} us", f"{t_gt * 1e3:.1f} us",
                 f"{t_gt / t_g:.2f}x", f"{gbytes / (t_g * 1e-3) / 1e12 / bw:.0%}"])

    y = torch.randn(A, D, device="cuda", dtype=torch.bfloat16)
    out = torch.zeros(T, D, device="cuda", dtype=torch.bfloat16)
    sbytes = A * D * 2 + 2 * T * D * 2  # minimal bytes: read the A rows once, read + write out once
    s_sets = [(out, y, ti)]
    t_s = time_ms(lambda o, y, t: moe.scatter_add_dense_tokens(o, y, t), s_sets)
    t_st = time_ms(lambda o, y, t: o.index_add_(0, t.long(), y), s_sets)
    rows.append([f"scatter_add_dense_tokens A={A} D={D}", f"{t_s * 1e3:.1f} us", f"{t_st * 1e3:.1f} us",
                 f"{t_st / t_s:.2f}x", f"{sbytes / (t_s * 1e-3) / 1e12 / bw:.0%}"])

    header = ["op", "mslk", "torch", "speed-up", "of copy bandwidth"]
    print("| " + " | ".join(header) + " |")
    for r in rows:
        print("| " + " | ".join(str(c) for c in r) + " |")
    write_results(args.out, "MoE routing & token movement: mslk vs torch", header, rows,
                  notes=f"Copy bandwidth {bw:.2f} TB/s (read + write).")


if __name__ == "__main__":
    main()
