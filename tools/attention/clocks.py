"""SM clock and board power while the sm90 attention kernel and cuDNN each run back to back for a
few seconds (nvidia-smi sampled every 100 ms): tells whether a shape runs power-limited (clock
below the 1980 MHz boost) and how the two kernels' draw compares.
Usage: python3 tools/attention/clocks.py B,H,S,D,causal [...]"""
import csv
import io
import statistics
import subprocess
import sys
import time
from datetime import datetime

import torch

from attn_shapes import cudnn, name, ours, parse, problem
from bench.common import env_var

SECONDS = 3.0
smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw", "--format=csv,noheader,nounits",
                        "-lms", "100"], stdout=subprocess.PIPE, text=True)
phases = []
for arg in sys.argv[1:]:
    shape = parse(arg)
    sets, flops = problem(*shape)
    mine = ours(shape[3], shape[4])

    def sm90(q, k, v):
        with env_var("MSLK_FMHA_KERNEL", "sm90"):
            return mine(q, k, v)

    for kernel, f in (("sm90", sm90), ("cuDNN", cudnn(shape[4])), ("sm90 again", sm90)):
        f(*sets[0])
        torch.cuda.synchronize()
        t0, n = time.time(), 0
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        while time.time() - t0 < SECONDS:
            for _ in range(8):
                f(*sets[n % len(sets)])
                n += 1
            torch.cuda.synchronize()
        e1.record()
        torch.cuda.synchronize()
        phases.append((f"{name(*shape)} {kernel}", t0 + 0.5, time.time(),
                       flops * n / (e0.elapsed_time(e1) / 1e3) / 1e12))
time.sleep(0.3)
smi.terminate()
rows = []
for r in csv.reader(io.StringIO(smi.communicate()[0])):
    try:
        ts = datetime.strptime(r[0].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
        rows.append((ts, float(r[1]), float(r[2])))
    except (ValueError, IndexError):
        continue
# nvidia-smi prints local time; align on the first sample vs this process's clock
for label, a, b, tf in phases:
    sel = [(clk, pw) for ts, clk, pw in rows if a <= ts <= b]
    if sel:
        print(f"{label}: {tf:.0f} TFLOP/s, SM clock {statistics.median(x[0] for x in sel):.0f} MHz "
              f"(min {min(x[0] for x in sel):.0f}), power {statistics.median(x[1] for x in sel):.0f} W, {len(sel)} samples")
    else:
        print(f"{label}: {tf:.0f} TFLOP/s, no samples (clock skew?)")
