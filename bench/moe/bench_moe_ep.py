"""Expert parallelism of the MoE layers: tokens per second per GPU at EP = world size against
EP = 1, with the same tokens per GPU (the layers and shapes of bench_moe_layers.py).

EP = 1 runs in this process on cuda:0; then `--world` processes (spawned here, NCCL, one GPU each)
build the layer with ep_size = world, each feeding its own tokens, and time the forward over a
fixed number of calls (every rank enters the same collectives); a rank's time is the slowest
rank's.
Weights come from layer_setup.RecordingInit: each rank draws its local experts by role.

    python3 -m bench.moe.bench_moe_ep [--world 2] [--out results_moe_ep.md] [--quick] [--share-gpu]

--share-gpu: every rank on cuda:0 over gloo, to check the script on a one-GPU machine (its figures
are not a measurement). --quick: small shapes, the CPU over gloo when there is no GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from bench.common import write_results
from bench.moe import layer_setup as S
from mslk.moe.layers import BaselineMoE, MetaShufflingMoE, MoEArgs

LAYERS = {"MetaShufflingMoE": MetaShufflingMoE, "BaselineMoE": BaselineMoE}
TARGET = 0.8  # tokens/s per GPU at EP = world over EP = 1


def cases(configs):
    return [(cfg, precision, path) for cfg in configs for precision in S.PRECISIONS for path in cfg.paths]


def fixed_time_ms(fn, sets, warmup: int = 3, reps: int = 10, calls: int = 4) -> float:
    """Median ms a call over reps of `calls` back-to-back calls. Unlike bench.common.time_ms the
    number of calls is fixed: every rank must enter the same collectives."""
    for i in range(warmup):
        fn(*sets[i % len(sets)])
    cuda = sets[0][0].is_cuda
    times = []
    for r in range(reps):
        if cuda:
            torch.cuda.synchronize()
            t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0.record()
        else:
            start = time.perf_counter()
        for c in range(calls):
            fn(*sets[(r * calls + c) % len(sets)])
        if cuda:
            t1.record()
            t1.synchronize()
            times.append(t0.elapsed_time(t1) / calls)
        else:
            times.append((time.perf_counter() - start) * 1e3 / calls)
    return statistics.median(times)


def time_layer(cfg: S.Config, precision: str, static: bool, device, ep: int, group) -> float:
    """Median ms of one forward of `cfg` at ep_size `ep` over `group` (None at EP 1)."""
    args = MoEArgs(**{**cfg.moe_args(precision), "ep_size": ep})
    layer = LAYERS[cfg.layer](group, group, args).build(S.RecordingInit(cfg), device=device)
    sets = S.input_sets(cfg, 2, device)
    t = fixed_time_ms(lambda x: layer(x, static), sets, reps=S.TIME_KW["reps"], calls=S.TIME_KW["calls"])
    del layer, sets
    return t


def worker(rank: int, world: int, store: str, share_gpu: bool, quick: bool, out: str):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", 0 if share_gpu else rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    backend = "nccl" if cuda and not share_gpu else "gloo"
    dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=world)
    results = {}
    try:
        for cfg, precision, path in cases(S.QUICK if quick else S.FULL):
            if cfg.experts % world:
                continue
            t = time_layer(cfg, precision, path == "static", device, world, dist.group.WORLD)
            worst = torch.tensor([t], dtype=torch.float64, device=device if backend == "nccl" else "cpu")
            dist.all_reduce(worst, op=dist.ReduceOp.MAX)
            results[S.row_key(cfg, precision, path)] = float(worst)
            if rank == 0:
                print(f"EP {world} {S.row_key(cfg, precision, path)}: {float(worst) * 1e3:.0f} us", flush=True)
        if rank == 0:
            Path(out).write_text(json.dumps(results))
    finally:
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--share-gpu", action="store_true")
    a = ap.parse_args()
    cuda = torch.cuda.is_available()
    if cuda and not a.share_gpu and torch.cuda.device_count() < a.world:
        raise SystemExit(f"bench_moe_ep: --world {a.world} needs {a.world} GPUs, this machine has "
                         f"{torch.cuda.device_count()} (--share-gpu checks the script on one)")
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    configs = S.QUICK if a.quick else S.FULL
    one = {}
    for cfg, precision, path in cases(configs):
        if cfg.experts % a.world == 0:
            one[S.row_key(cfg, precision, path)] = time_layer(cfg, precision, path == "static", device, 1, None)
            print(f"EP 1 {S.row_key(cfg, precision, path)}: {one[S.row_key(cfg, precision, path)] * 1e3:.0f} us",
                  flush=True)
    if cuda:
        torch.cuda.empty_cache()
    with tempfile.TemporaryDirectory() as tmp:
        got = Path(tmp) / "ep.json"
        mp.spawn(worker, args=(a.world, str(Path(tmp) / "store"), a.share_gpu, a.quick, str(got)), nprocs=a.world,
                 join=True)
        many = json.loads(got.read_text())
    rows = []
    for cfg, precision, path in cases(configs):
        key = S.row_key(cfg, precision, path)
        if key not in one:
            continue
        t1, tw = one[key], many[key]
        per_gpu_1, per_gpu_w = cfg.tokens / (t1 * 1e-3), cfg.tokens / (tw * 1e-3)
        rows.append([cfg.layer, precision, path, cfg.shape, cfg.tokens, f"{t1 * 1e3:.0f}", f"{tw * 1e3:.0f}",
                     f"{per_gpu_1:.3g}", f"{per_gpu_w:.3g}", f"{per_gpu_w / per_gpu_1:.2f}"])
        print(" | ".join(rows[-1][:3] + rows[-1][5:]), flush=True)
    if a.out and not cuda:
        print("bench_moe_ep: no table on the CPU (write_results names the GPU)")
    elif a.out:
        mode = ("every rank on one GPU over gloo: a check of the script, not a measurement" if a.share_gpu
                else "one GPU a rank, NCCL" if cuda else "CPU over gloo: a check of the script")
        notes = (f"EP = 1 in one process; EP = {a.world} in {a.world} processes ({mode}), the same tokens per GPU, "
                 f"ep_size = {a.world}, the experts split evenly. Time: median forward over 10 x 4 calls, the "
                 f"slowest rank's. Target: tokens/s per GPU at EP {a.world} >= {TARGET}x EP 1.")
        write_results(a.out, f"MoE layers: expert parallelism over {a.world} ranks",
                      ["layer", "precision", "path", "shape", "tokens per GPU", "EP 1 us", f"EP {a.world} us",
                       "tokens/s/GPU EP 1", f"tokens/s/GPU EP {a.world}", f"EP {a.world} / EP 1"], rows, notes)


if __name__ == "__main__":
    main()
