"""Raw Blackwell torch ops (spec group "Attention - Raw Blackwell torch ops").

torch.ops.mslk.fmha_fwd / fmha_bwd / cutlass_blackwell_fmha_fwd / _bwd run mslk's fused attention
ops here (registered by mslk.attention.fmha._raw_bwd_ops). fmha_gen_fwd (the SM100 decode kernel's
op) runs mslk's split-K decode op, splits left unmerged (_decode.py).
"""

from __future__ import annotations

from mslk.attention.cutlass_blackwell_fmha import _decode
from mslk.utils.torch.library import define as _define

_define("mslk", "fmha_gen_fwd(Tensor query, Tensor key, Tensor value, Tensor seqlen_kv, Tensor? batch_idx=None, "
        "int kernel_type=0, int window_left=-1, int window_right=-1, int split_k_size=1024) -> (Tensor, Tensor)",
        _decode.gen_fwd, _decode.gen_fwd_fake)
