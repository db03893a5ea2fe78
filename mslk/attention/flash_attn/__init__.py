"""Standalone CuTe Flash-Attention facade (spec group "Attention - Standalone facades").

`flash_attn_func` aliases `flash_attn.cute.interface.flash_attn_func` when that optional
dependency is installed; otherwise it is this build's internal implementation: forward only,
through torch.ops.mslk_flash3.flash_fwd (the exact reference path), returning (out, lse) like the
CuTe interface. Only flash_attn_func is exported (no varlen export, as in the spec).
"""

from typing import Optional, Tuple

import torch


def _flash_attn_func(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, softmax_scale: Optional[float] = None,
                     causal: bool = False, window_size: Tuple[Optional[int], Optional[int]] = (None, None),
                     learnable_sink=None, softcap: float = 0.0, num_splits: int = 1, pack_gqa=None,
                     deterministic: bool = False, mask_mod=None, return_lse: bool = False):
    """q [B, Mq, H, K], k/v [B, Mkv, Hkv, K|Kv] -> (out [B, Mq, H, Kv], lse [B, H, Mq]). Windows and
    causal are bottom-right aligned (FlashAttention convention)."""
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        raise NotImplementedError("flash_attn_func: backward is not implemented in this build (forward only); "
                                  "call under torch.no_grad()")
    if learnable_sink is not None or softcap != 0.0 or mask_mod is not None:
        raise NotImplementedError("flash_attn_func: learnable_sink, softcap and mask_mod are not supported here")
    scale = q.shape[-1] ** -0.5 if softmax_scale is None else float(softmax_scale)
    wl = -1 if window_size[0] is None else int(window_size[0])
    wr = -1 if window_size[1] is None else int(window_size[1])
    out, lse = torch.ops.mslk_flash3.flash_fwd(q, k, v, None, None, None, None, q.shape[1], k.shape[1], 0.0, scale,
                                               causal, window_left=wl, window_right=wr)
    return out, lse


try:  # pragma: no cover - optional dependency
    from flash_attn.cute.interface import flash_attn_func  # type: ignore
except Exception:  # noqa: BLE001
    flash_attn_func = _flash_attn_func

__all__ = ["flash_attn_func"]
