"""A/B of an attention tuning switch, interleaved: for each shape, alternates the values of one
environment variable (read per call by the op) `reps` times and prints each value's median and range
of TFLOP/s, so that drift in clocks between reps hits every value alike.
Usage: python3 tools/attention/ab_env.py VAR v1,v2 reps B,H,S,D,causal [...]
(value "-" unsets the variable), e.g. ab_env.py MSLK_FMHA_SM90_STREAMK -,0 7 2,32,4096,128,0"""
import statistics
import sys

from attn_shapes import name, ours, parse, problem
from bench.common import env_var, time_ms

var, values, reps = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])
for arg in sys.argv[4:]:
    shape = parse(arg)
    sets, flops = problem(*shape)
    f = ours(shape[3], shape[4])
    res = {v: [] for v in values}
    with env_var("MSLK_FMHA_KERNEL", "sm90"):
        for _ in range(reps):
            for v in values:
                with env_var(var, None if v == "-" else v):
                    res[v].append(flops / time_ms(f, sets, reps=7) / 1e9)
    line = ", ".join(f"{var}={v}: median {statistics.median(r):.0f} ({min(r):.0f}-{max(r):.0f})" for v, r in res.items())
    print(f"{name(*shape)}: {line}", flush=True)
