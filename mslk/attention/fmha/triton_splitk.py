"""Split-K decode attention (the spec's `triton_splitk` backend), backed by mslk's CUDA kernel.

`FwOp` runs `torch.ops.mslk.fmha_decode_splitk` (csrc/attention/kernels/fmha_decode_kernel.cuh):
each CTA streams one (sequence, K/V head, split) chunk of the K/V cache once for all the query
heads that read that K/V head (GQA / MQA: K/V expand()ed over the query heads of a group, BMGHK,
or over every head, BMHK), and the attention-merge kernel combines the splits. fp16 / bf16, head
dims 16..256 and 512 (K == Kv; the kernel takes up to 256, and 512 runs an exact path on the GPU:
each K/V head expanded to its query heads, float32 attention on ATen matmuls, the CPU backend's
math; quantized caches dequantized to q's dtype first), the masks of SUPPORTED_ATTN_BIAS_TYPES (dense causal, padded, gappy and
paged K/V), the LSE (memory_efficient_attention_partial) and any output dtype. NUM_SPLITS = 0 picks
the split count by the kernel's heuristic; FwOp_S{n} fix it. The result does not depend on the
split count beyond rounding.

Quantized K/V caches (layouts: mslk.attention.fmha.quantized_kv): int32 K/V of rows D // 8 +
NUM_GROUPS (INT4, the group count implied by the row length; a subclass may pin NUM_GROUPS) or,
with InputsFp8's k_fp8_scale_shift / v_fp8_scale_shift, rows of D // 4 (FP8 E4M3 rowwise; fp16
scale/shift pairs, or float32 scales with use_fp32_scales). Semantics: attention over the
dequantized cache. The op takes the caches as they are. On the GPU, FP8 and one-group INT4 caches
are read raw by fp16 tensor-core MMAs with each row's scale and shift applied to the scores and
probabilities (the dequantized values are never rounded); other INT4 caches are dequantized to q's
dtype tile by tile inside the kernel, with the bits of dequantizing into a temporary first
(MSLK_DECODE_KV_DEQUANT=separate; the CPU backend's rule). docs/design/attention_decode.md.
"""

import dataclasses
import math
from typing import Dict, List, Optional, Tuple

import torch

from mslk.attention.fmha import _backends as _b
from mslk.attention.fmha import _decode
from mslk.attention.fmha.common import AttentionFwOpBase, Context, Inputs, InputsFp8, _kernel_registered

# Query rows of one group (query heads per K/V head x queries) the grid takes per sequence, in
# chunks of 16 (the kernel's grid.z holds sequences x chunks <= 65535).
_MAX_GRID_Z = 65535


class FwOp(_b.HeadDims, AttentionFwOpBase):
    NAME = "triton_splitKF"
    SUPPORTED_DEVICES = {"cuda"}
    CUDA_MINIMUM_COMPUTE_CAPABILITY = (8, 0)
    SUPPORTED_DTYPES = set(_b.HALF)
    SUPPORTED_MAX_K = 512
    SUPPORTED_MIN_K = 16
    SUPPORTED_ATTN_BIAS_TYPES = (*_b.BASIC_MASKS, *_b.VARLEN_MASKS, *_b.PADDED_MASKS, *_b.GAPPY_MASKS,
                                 *_b.PAGED_MASKS)
    SUPPORTS_BMGHK = True
    SUPPORTS_PARTIAL = True
    SUPPORTS_OUTPUT_DTYPE = True
    VARLEN_LSE_PACKED = True
    UNAVAILABLE_REASON = "needs a CUDA build of mslk (torch.ops.mslk.fmha_decode_splitk has no CUDA kernel here)"
    HEAD_DIMS = {16, 32, 64, 128, 256, 512}
    NUM_SPLITS: int = 0  # 0: chosen by a heuristic
    SUPPORTS_QUANTIZED_KV = True
    NUM_GROUPS: Optional[int] = None  # INT4 groups a row; None: implied by the key's row length

    @classmethod
    def is_available(cls) -> bool:
        return _decode.op_loaded() and _kernel_registered(_decode._OP, "CUDA")

    @classmethod
    def not_supported_reasons(cls, d: Inputs):
        quantized = d.key.dtype == torch.int32 or d.value.dtype == torch.int32
        reasons = _quantized_reasons(cls, d) if quantized else []
        if quantized and not reasons:  # the base checks on the dequantized K/V's shapes
            D = d.query.shape[-1]
            logical = lambda x: torch.empty((*x.shape[:-1], D), dtype=d.query.dtype, device="meta")  # noqa: E731
            reasons += super().not_supported_reasons(dataclasses.replace(d, key=logical(d.key),
                                                                         value=logical(d.value)))
        elif not quantized:
            reasons += super().not_supported_reasons(d)
            if d.key.dtype != d.query.dtype:
                reasons.append(f"key dtype {d.key.dtype} differs from the query's {d.query.dtype}")
        if d.output_dtype == torch.float64:
            reasons.append("output_dtype float64 (the kernel writes float16, bfloat16 or float32)")
        if isinstance(d, InputsFp8) and (d.q_fp8_scale_shift is not None or d.quantize_qk_to_fp8
                                         or d.quantize_pv_to_fp8):
            reasons.append("FP8 queries (q_fp8_scale_shift, quantize_qk_to_fp8, quantize_pv_to_fp8) are not served")
        overflow = grid_overflow(d)
        if overflow:
            seqs, rows = overflow
            reasons.append(f"too many query rows: {seqs} sequences x {rows} rows per K/V head "
                           f"(at most {_MAX_GRID_Z} chunks of 16)")
        return reasons

    @classmethod
    def apply(cls, inp: Inputs, needs_gradient: bool) -> Tuple[torch.Tensor, Optional[Context]]:
        from mslk.attention.fmha.cutlass import mask_descriptor

        q, k, v = inp.query, inp.key, inp.value
        if q.ndim == 3:
            q, k, v = q.unsqueeze(2), k.unsqueeze(2), v.unsqueeze(2)
        q5, k4, v4, out_back, lse_back = _decode.group_heads(q, k, v)
        fp8 = k.dtype == torch.int32 and isinstance(inp, InputsFp8) and inp.k_fp8_scale_shift is not None
        ks, vs = _decode.grouped_scale_shift(q, k, v, inp.k_fp8_scale_shift if fp8 else None,
                                             inp.v_fp8_scale_shift if fp8 else None)
        desc = mask_descriptor(inp.attn_bias, q.device)
        desc.pop("bias")
        splits = cls.NUM_SPLITS or int(getattr(inp, "num_splits", 0) or 0)
        out, lse = torch.ops.mslk.fmha_decode_splitk(q5, k4, v4, scale=inp.scale_float, num_splits=splits,
                                                     output_dtype=inp.get_output_dtype(), k_scale_shift=ks,
                                                     v_scale_shift=vs, **desc)
        out, lse = out_back(out), lse_back(lse)
        if inp.query.ndim == 3:
            out = out[:, :, 0]
        return out, Context(lse=lse, out=out)

    @classmethod
    def get_split_k(cls, B: int, G: int, H: int, Mk: int, Mq: int, page_size: int, is_paged: bool = False) -> int:
        """The split count the kernel's heuristic picks (num_splits=0) for B sequences, G K/V heads of
        H query heads each, Mq queries and Mk keys per sequence (paged or not: the same keys), head
        dim 128, on the current CUDA device (an H200's 132 SMs when there is none)."""
        sms = torch.cuda.get_device_properties().multi_processor_count if torch.cuda.is_available() else 132
        pairs = B * G * -(-(H * Mq) // 16)
        return int(torch.ops.mslk.fmha_decode_num_splits(pairs, Mk, 128, sms))

    @classmethod
    def get_operator(cls, splitk: int, *, block_m=None, block_n=None, num_warps=None, num_stages=None,
                     split_k_early_exit=None) -> type:
        """The class fixed to `splitk` splits (the tile arguments are the kernel's own: ignored)."""
        return FwOp_Map[splitk] if splitk in FwOp_Map else _b.with_num_splits(cls, int(splitk))


def grid_overflow(d: Inputs) -> Optional[Tuple[int, int]]:
    """(sequences, query rows per K/V head) where they need more grid chunks than the kernel has,
    else None."""
    if d.query.ndim not in (4, 5):
        return None
    rows = _decode.group_size(d.query, d.key, d.value)
    qi = getattr(d.attn_bias, "q_seqinfo", None)
    rows *= qi.max_seqlen if qi is not None else d.query.shape[1]
    seqs = len(qi.seqstart_py) - 1 if qi is not None else d.query.shape[0]
    return (seqs, rows) if seqs * -(-rows // 16) > _MAX_GRID_Z else None


def _quantized_reasons(cls, d: Inputs) -> List[str]:
    """Why int32 K/V are not a cache layout this operator reads (each names the argument)."""
    k, v, D = d.key, d.value, d.query.shape[-1]
    if not (k.dtype == v.dtype == torch.int32):
        return [f"quantized K/V: key and value must both be int32; got {k.dtype} and {v.dtype}"]
    if k.shape != v.shape:
        return [f"quantized K/V: key {tuple(k.shape)} and value {tuple(v.shape)} must have one shape"]
    ss = (d.k_fp8_scale_shift, d.v_fp8_scale_shift) if isinstance(d, InputsFp8) else (None, None)
    if ss == (None, None):  # INT4
        groups = k.shape[-1] - D // 8
        if D % 8 != 0 or groups not in (1, 2, 4, 8):
            return [f"INT4 K/V: key last dim {k.shape[-1]} is not head dim {D} // 8 + NUM_GROUPS with NUM_GROUPS "
                    "in (1, 2, 4, 8) (FP8 caches need InputsFp8 with k_fp8_scale_shift / v_fp8_scale_shift)"]
        if cls.NUM_GROUPS is not None and groups != cls.NUM_GROUPS:
            return [f"INT4 K/V: key last dim {k.shape[-1]} implies {groups} groups; {cls.__name__}.NUM_GROUPS is "
                    f"{cls.NUM_GROUPS}"]
        if D % groups != 0:
            return [f"INT4 K/V: head dim {D} is not a multiple of NUM_GROUPS {groups}"]
        return []
    reasons = []
    if 4 * k.shape[-1] != D:
        reasons.append(f"FP8 K/V: key last dim {k.shape[-1]} must be head dim {D} // 4")
    rows = math.prod(k.shape[:-1])
    want = torch.float32 if d.use_fp32_scales else torch.int32
    for name, x in zip(("k_fp8_scale_shift", "v_fp8_scale_shift"), ss):
        if x is None:
            reasons.append(f"FP8 K/V: {name} is missing")
        elif x.dtype != want:
            reasons.append(f"FP8 K/V: {name} must be {want} with use_fp32_scales={d.use_fp32_scales} "
                           f"(int32 fp16 scale/shift pairs, or float32 scales); got {x.dtype}")
        elif x.numel() != rows or x.device != k.device:
            reasons.append(f"FP8 K/V: {name} must hold one entry per key row, shape {tuple(k.shape[:-1])} on "
                           f"{k.device}; got {tuple(x.shape)} on {x.device}")
    return reasons


# Named power-of-two split counts 1..128, plus 48, 72, 80, 96 and 112.
FwOp_Map: Dict[int, type] = {n: _b.with_num_splits(FwOp, n) for n in sorted([1, 2, 4, 8, 16, 32, 64, 128, 48, 72, 80, 96, 112])}
FwOp_S1 = FwOp_Map[1]
FwOp_S2 = FwOp_Map[2]
FwOp_S4 = FwOp_Map[4]
FwOp_S8 = FwOp_Map[8]
FwOp_S16 = FwOp_Map[16]
FwOp_S32 = FwOp_Map[32]
FwOp_S64 = FwOp_Map[64]
FwOp_S128 = FwOp_Map[128]


def merge_attentions(attn_out, lse_out, attn_split, lse_split) -> None:
    """In place, allocation-free merge of split attention: attn_split [S, B, M, (G,) H, K] and
    lse_split [S, B, (G,) H, M] (float32) into attn_out [B, M, (G,) H, K] and lse_out [B, (G,) H, M]
    (or None). Runs mslk's merge kernel (torch.ops.mslk._fmha_merge_attentions_into)."""
    from mslk.attention.fmha import _merge_ops

    _merge_ops.merge_into(attn_out, lse_out, attn_split, lse_split)
