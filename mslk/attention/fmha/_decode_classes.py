"""The Blackwell decode operator classes (cutlass_blackwell.FwOpDecode, cute_blackwell.FwOpDecode)
served by mslk's split-K decode kernel (triton_splitk.FwOp's apply) on every GPU it runs on,
within each class's contract: fp16 / bf16 (and the kernel's quantized K/V caches), head dims 64 and
128, K == Kv, no dropout. Automatic dispatch does not pick them (pin them with op=)."""

from __future__ import annotations

from mslk.attention.fmha import _backends as _b
from mslk.attention.fmha import triton_splitk


def decode_class(name: str, module: str, masks: tuple, partial: bool) -> type:
    return type("FwOpDecode", (triton_splitk.FwOp,), {
        "NAME": name, "__module__": module, "HEAD_DIMS": {64, 128}, "SUPPORTED_ATTN_BIAS_TYPES": masks,
        "SUPPORTS_PARTIAL": partial,
        "__doc__": f"Decode forward ({name}) on mslk's split-K decode kernel: fp16 / bf16, head dims 64 and 128, "
                   "the masks of SUPPORTED_ATTN_BIAS_TYPES.",
    })


# cutlass_blackwell: dense causal, varlen and padded-key decode masks, no partial attention.
CUTLASS = (*_b.BASIC_MASKS, *_b.VARLEN_MASKS, *_b.PADDED_MASKS)
# cute_blackwell: also the paged and gappy ones ("paged-gappy support is limited to this decode path").
CUTE = (*CUTLASS, *_b.GAPPY_MASKS, *_b.PAGED_MASKS)
