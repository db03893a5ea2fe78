"""Torch ops of the spec without a kernel in this build: the FP4 / MX GEMMs (spec group "GEMM -
FP4 & microscaling torch ops"; no FP4 / MX kernel yet). Each op exists under the spec's schema
with a fake implementation (X @ W.T shapes) and raises when called; see mslk.utils.unavailable.
"""

from __future__ import annotations

import torch

from mslk.utils import unavailable as _u


def _n(wq: torch.Tensor) -> int:
    # Weights are [N, K'] or, grouped, [G, N, K']; K' is the packed K, which the output never has.
    return wq.shape[-2] if wq.dim() == 3 else wq.shape[0]


def _dense_fake(XQ, WQ, *args, **kwargs):
    return XQ.new_empty((*XQ.shape[:-1], _n(WQ)), dtype=torch.bfloat16)


def _grouped_fake_of(op: str):
    def fake(XQ, WQ, x_scale, w_scale, offsets, *args, **kwargs):
        if XQ.dim() != 2 or WQ.dim() not in (2, 3):
            raise ValueError(f"{op}: argument 'XQ' must be 2-D [total_M, K'] and 'WQ' [G, N, K'] (groups along "
                             f"M) or [N, K'] (groups along K); got 'XQ' {tuple(XQ.shape)}, 'WQ' {tuple(WQ.shape)}")
        if WQ.dim() == 3:  # 2D x 3D: tokens of every group stacked along M
            return XQ.new_empty((XQ.shape[0], WQ.shape[1]), dtype=torch.bfloat16)
        # 2D x 2D: groups along K, one [M, N] output per group
        return XQ.new_empty((offsets.shape[0], XQ.shape[0], WQ.shape[0]), dtype=torch.bfloat16)

    return fake


_Q = "Tensor XQ, Tensor WQ, Tensor x_scale, Tensor w_scale"
SCHEMAS = {
    f"f4f4bf16({_Q}, Tensor? output=None, Tensor? global_scale=None, int mxfp4_block_size=32) -> Tensor":
        _dense_fake,
    f"f4f4bf16_grouped_mm({_Q}, Tensor offsets, Tensor? output=None, Tensor? global_scale=None) -> Tensor":
        _grouped_fake_of,
    (f"f4f4bf16_grouped_stacked({_Q}, Tensor M_sizes, Tensor? global_scale=None, "
     "Tensor? starting_row_after_padding=None, bool use_mx=True) -> Tensor"): _dense_fake,
    (f"f4f4bf16_ultra_grouped_mm({_Q}, Tensor offsets, Tensor x_global_scale, Tensor w_global_scale, "
     "Tensor? output=None) -> Tensor"): _grouped_fake_of,
    f"mx8mx4bf16({_Q}, Tensor? output=None) -> Tensor": _dense_fake,
    f"mx8mx4bf16_grouped_mm({_Q}, Tensor offsets, Tensor? output=None) -> Tensor": _grouped_fake_of,
    f"mx8mx8bf16_grouped_mm({_Q}, Tensor offsets, Tensor? output=None, int? actual_num_tokens=None) -> Tensor":
        _grouped_fake_of,
    f"mx8mx6bf16({_Q}, Tensor? output=None) -> Tensor": _dense_fake,
    f"mx6mx6bf16({_Q}, Tensor? output=None, int splits=0) -> Tensor": _dense_fake,
}

for _schema, _fake in SCHEMAS.items():
    if _fake is _grouped_fake_of:
        _fake = _grouped_fake_of(_schema.split("(")[0])
    _u.define_op("mslk", _schema, _u.FP4, _fake)

