"""Raw Blackwell torch ops (spec group "Attention - Raw Blackwell torch ops").

torch.ops.mslk.fmha_fwd / fmha_bwd / cutlass_blackwell_fmha_fwd / _bwd run mslk's fused attention
ops here (registered by mslk.attention.fmha._raw_bwd_ops). fmha_gen_fwd (the SM100 decode
kernel) exists under the spec's schema with a fake implementation and raises when called
(mslk.utils.unavailable).
"""

from __future__ import annotations

import math

import torch

from mslk.utils import unavailable as _u


def _gen_fake(query, key, value, seqlen_kv, batch_idx=None, kernel_type=0, window_left=-1, window_right=-1,
              split_k_size=1024):
    # q [B, H, D] or [B, 1, H, D]; K/V [B, Mk, Hkv, D]; splits are left unmerged.
    b, h, d = query.shape[0], query.shape[-2], value.shape[-1]
    splits = max(1, math.ceil(key.shape[1] / split_k_size)) if split_k_size > 0 else 1
    out = query.new_empty((b, 1, h, splits, d))
    lse = query.new_empty((b, splits, h, 1), dtype=torch.float32)
    return out, lse


SCHEMAS = {
    ("fmha_gen_fwd(Tensor query, Tensor key, Tensor value, Tensor seqlen_kv, Tensor? batch_idx=None, "
     "int kernel_type=0, int window_left=-1, int window_right=-1, int split_k_size=1024) -> (Tensor, Tensor)"):
        _gen_fake,
}

for _schema, _fake in SCHEMAS.items():
    _u.define_op("mslk", _schema, _u.SM100, _fake)
