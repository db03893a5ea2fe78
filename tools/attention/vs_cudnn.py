"""Quick look: the sm90 kernel's default rows, with and without the stream-K tail
(MSLK_FMHA_SM90_STREAMK=0), vs cuDNN SDPA on shapes given on the command line, two reps in one
process. Usage: python3 tools/attention/vs_cudnn.py B,H,S,D,causal [...]
B2 H33 S4096 d128 fills 16 rounds of 132 SMs exactly where the bench's H32 leaves the last round
half empty: the pair tells a tail loss from a per-tile one. The bench is the record."""
import os
import sys

from attn_shapes import cudnn, name, ours, parse, problem
from bench.common import env_var, time_ms

os.environ["MSLK_FMHA_KERNEL"] = "sm90"
for rep in range(2):
    for arg in sys.argv[1:]:
        shape = parse(arg)
        sets, flops = problem(*shape)
        mine, peer = ours(shape[3], shape[4]), cudnn(shape[4])
        diff = (mine(*sets[0]).float() - peer(*sets[0]).transpose(1, 2).float()).abs().max().item()
        with env_var("MSLK_FMHA_SM90_STREAMK", "0"):
            whole = flops / time_ms(mine, sets) / 1e9
        a, b = flops / time_ms(mine, sets) / 1e9, flops / time_ms(peer, sets) / 1e9
        print(f"rep {rep} {name(*shape)}: sm90 {a:.0f} (whole tiles {whole:.0f}) cuDNN {b:.0f} TFLOP/s, "
              f"ratio {a / b:.3f} (max diff {diff:.1e})", flush=True)
