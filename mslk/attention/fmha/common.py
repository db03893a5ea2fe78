"""Operator protocol and input descriptors (spec group "Attention - Operator protocol & inputs").

Layouts: q/k/v are BMK [B, M, K], BMHK [B, M, H, K] or BMGHK [B, M, G, H, K]. The last dimension
must have stride 1; every other stride is free (an `expand()`ed K/V with stride 0 is accepted).
Heads are never broadcast: for GQA/MQA expand K/V heads explicitly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Set, Tuple, Type, Union

import torch

from mslk.attention.fmha import attn_bias as _ab
from mslk.attention.fmha.attn_bias import AttentionBias

__all__ = [
    "AttentionOp", "AttentionOpBase", "AttentionFwOpBase", "AttentionBwOpBase", "Inputs", "InputsFp8",
    "InputsMXFp8", "Context", "Gradients", "bmghk2bmhk", "bmk2bmhk", "check_lastdim_alignment_stride1",
    "bmhk2bhk", "ScaledTensor", "pack_fp8_tensorwise_per_head",
]


def _is_varlen(bias: Any) -> bool:
    return isinstance(bias, _ab.VARLEN_BIASES)


@dataclass
class Inputs:
    """Normalized fMHA input descriptor used by dispatch and the backends."""

    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    attn_bias: Optional[Union[torch.Tensor, AttentionBias]] = None
    p: float = 0.0
    scale: Optional[float] = None
    output_dtype: Optional[torch.dtype] = None
    is_partial: bool = False
    quantize_pv_to_fp8: bool = False
    quantize_qk_to_fp8: bool = False
    use_fp32_scales: bool = False
    num_splits: int = 0

    @property
    def device(self) -> torch.device:
        return self.query.device

    @property
    def scale_float(self) -> float:
        return self.query.shape[-1] ** -0.5 if self.scale is None else float(self.scale)

    @property
    def nbytes(self) -> int:
        return sum(x.untyped_storage().nbytes() for x in (self.query, self.key, self.value))

    def get_output_dtype(self) -> torch.dtype:
        if self.output_dtype is not None:
            return self.output_dtype
        if self.is_partial and self.query.dtype is not torch.float64:
            return torch.float32
        return self.query.dtype

    def normalize_bmhk(self) -> Tuple[int, ...]:
        """Turns BMK inputs into BMHK (H=1) in place; returns the original query shape."""
        if self.query.ndim not in (3, 4, 5):
            raise ValueError(f"Invalid shape for query: {tuple(self.query.shape)}. Expected shape [batch, seqlen, "
                             "head_groups, num_heads_per_group, K], [batch, seqlen, num_heads, K], or "
                             "[batch, seqlen, K].")
        output_shape = (*self.query.shape[:-1], self.value.shape[-1])
        if self.value.dtype == torch.int32 and self.query.dtype.is_floating_point:  # quantized V: packed last dim
            output_shape = (*self.query.shape[:-1], self.query.shape[-1])
        if self.query.ndim == 3:
            self.query = self.query.unsqueeze(2)
            self.key = self.key.unsqueeze(2)
            self.value = self.value.unsqueeze(2)
            if isinstance(self.attn_bias, torch.Tensor) and self.attn_bias.ndim == 3:
                self.attn_bias = self.attn_bias.unsqueeze(1)
            elif isinstance(self.attn_bias, _ab.LowerTriangularMaskWithTensorBias) and self.attn_bias._bias.ndim == 3:
                self.attn_bias = _ab.LowerTriangularMaskWithTensorBias(self.attn_bias._bias.unsqueeze(1))
        return output_shape

    def validate_inputs(self) -> None:
        q, k, v = self.query, self.key, self.value
        for name, x in (("query", q), ("key", k), ("value", v)):
            if not isinstance(x, torch.Tensor):
                raise ValueError(f"{name} must be a tensor, got {type(x).__name__}")
        if q.ndim not in (3, 4, 5):
            raise ValueError(f"Query must be 3-D (BMK), 4-D (BMHK) or 5-D (BMGHK); got shape {tuple(q.shape)}")
        if q.ndim != k.ndim or q.ndim != v.ndim:
            raise ValueError(f"Query/Key/Value must have the same rank; got query.ndim={q.ndim}, "
                             f"key.ndim={k.ndim}, value.ndim={v.ndim}")
        if q.device != k.device or q.device != v.device:
            raise ValueError(f"Query/Key/Value must be on the same device; got {q.device}, {k.device}, {v.device}")
        quantized_kv = k.dtype == v.dtype == torch.int32 and q.dtype.is_floating_point  # INT4 / FP8 caches
        if not (q.dtype == k.dtype == v.dtype) and not quantized_kv:
            raise ValueError(f"Query/Key/Value must have the same dtype; got {q.dtype}, {k.dtype}, {v.dtype}")
        B, Mq = q.shape[0], q.shape[1]
        Mkv = k.shape[1]
        if k.shape[0] != B or v.shape[0] != B:
            raise ValueError(f"Batch sizes differ: query {B}, key {k.shape[0]}, value {v.shape[0]}")
        if v.shape[1] != Mkv:
            raise ValueError(f"Key and value must have the same sequence length; got key {Mkv}, value {v.shape[1]}")
        if q.shape[2:-1] != k.shape[2:-1] or q.shape[2:-1] != v.shape[2:-1]:
            raise ValueError(f"Head dimensions differ: query {tuple(q.shape)}, key {tuple(k.shape)}, value "
                             f"{tuple(v.shape)} (MSLK does not broadcast heads: expand K/V explicitly for GQA/MQA)")
        if q.shape[-1] != k.shape[-1] and not quantized_kv:
            raise ValueError(f"Query and key must have the same embedding dim; got {q.shape[-1]} and {k.shape[-1]}")
        for name, x in (("query", q), ("key", k), ("value", v)):
            if x.shape[-1] > 1 and x.stride(-1) != 1:
                raise ValueError(f"{name} must have stride 1 in its last dimension; got stride {x.stride()} "
                                 "(call .contiguous())")
        if not (0.0 <= float(self.p) < 1.0):
            raise ValueError(f"Invalid dropout probability p={self.p}; expected 0 <= p < 1")
        if self.scale is not None and not isinstance(self.scale, (int, float)):
            raise ValueError(f"scale must be a float or None, got {type(self.scale).__name__}")
        bias = self.attn_bias
        if bias is not None and not isinstance(bias, (torch.Tensor, AttentionBias)):
            raise ValueError(f"attn_bias must be None, a tensor or an AttentionBias; got {type(bias).__name__}")
        if isinstance(bias, torch.Tensor):
            if bias.device != q.device:
                raise ValueError(f"attn_bias is on {bias.device} but query is on {q.device}")
            if not bias.dtype.is_floating_point:
                raise TypeError(f"attn_bias must have a floating dtype (an additive bias, -inf where masked); "
                                f"got {bias.dtype}")
            full = (B, *q.shape[2:-1], Mq, Mkv) if q.ndim > 3 else (B, Mq, Mkv)
            if bias.ndim > len(full) or any(b not in (1, f) for b, f in zip(bias.shape[::-1], full[::-1])):
                raise ValueError(f"attn_bias of shape {tuple(bias.shape)} does not broadcast to {full}")
        if _is_varlen(bias):
            if B != 1:
                raise ValueError(f"Expected query.shape[0] == 1 with a variable-length bias "
                                 f"({type(bias).__name__}): sequences are packed; got batch {B}")
            if Mq != bias.q_seqinfo.total:
                raise ValueError(f"{type(bias).__name__}: query has {Mq} tokens but the sequences total "
                                 f"{bias.q_seqinfo.total}")
            if isinstance(bias, _ab._PagedBase):
                # Checked where the block table is on the host: on the GPU the max would be a host sync
                # (no decode step in a CUDA graph); the kernels read pages outside the pool as zeros.
                if bias.block_tables.device.type == "cpu" and Mkv < bias._kv_total():
                    raise ValueError(f"{type(bias).__name__}: paged K/V has {Mkv} keys but block_tables "
                                     f"addresses {bias._kv_total()}")
            elif Mkv != bias._kv_total():
                raise ValueError(f"{type(bias).__name__}: key has {Mkv} tokens but the bias describes "
                                 f"{bias._kv_total()}")
        if isinstance(bias, _ab.LowerTriangularMaskWithTensorBias):
            b = bias._bias
            full = (B, *q.shape[2:-1], Mq, Mkv) if q.ndim > 3 else (B, Mq, Mkv)
            if b.ndim > len(full) or any(x not in (1, f) for x, f in zip(b.shape[::-1], full[::-1])):
                raise ValueError(f"attn_bias tensor of shape {tuple(b.shape)} does not broadcast to {full}")

    def get_qkv_in_bmghk(self) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if self.query.ndim == 5:
            return self.query, self.key, self.value
        if self.query.ndim == 4:
            return self.query.unsqueeze(2), self.key.unsqueeze(2), self.value.unsqueeze(2)
        return self.query[:, :, None, None], self.key[:, :, None, None], self.value[:, :, None, None]


@dataclass
class InputsFp8(Inputs):
    """Inputs for row/group quantized K/V caches (packed fp16 scale/shift metadata)."""

    k_fp8_scale_shift: Optional[torch.Tensor] = None
    v_fp8_scale_shift: Optional[torch.Tensor] = None
    q_fp8_scale_shift: Optional[torch.Tensor] = None


@dataclass
class InputsMXFp8(Inputs):
    """Inputs for MXFP8 K/V with E8M0 block scales."""

    k_fp8_scale: Optional[torch.Tensor] = None
    v_fp8_scale: Optional[torch.Tensor] = None
    q_fp8_scale: Optional[torch.Tensor] = None


@dataclass
class Context:
    """Forward context consumed by a backward operator."""

    lse: torch.Tensor
    out: torch.Tensor
    op_bw: Optional[Type["AttentionBwOpBase"]] = None
    rng_state: Optional[Any] = None
    qkv_share_storage: bool = False

    def get_padded_lse(self, pad_to: int, force_pad_inf: bool = False) -> torch.Tensor:
        """LSE padded along M (its last dim) to a multiple of pad_to with +inf; with force_pad_inf,
        entries past the output's M are set to +inf too."""
        lse = self.lse
        m_out = self.out.shape[1]
        if force_pad_inf:
            lse = lse[..., :m_out]
        pad = (pad_to - lse.shape[-1] % pad_to) % pad_to
        if pad:
            lse = torch.nn.functional.pad(lse, [0, pad], value=math.inf)
        return lse


@dataclass
class Gradients:
    dq: torch.Tensor
    dk: torch.Tensor
    dv: torch.Tensor
    db: Optional[torch.Tensor] = None


_CAPABILITIES: Dict[int, Tuple[int, int]] = {}  # per device index, looked up once
_CUDA_AVAILABLE: List[bool] = []  # looked up once (torch.cuda.is_available reads the environment each call)


@torch.compiler.assume_constant_result
def cuda_available() -> bool:
    if not _CUDA_AVAILABLE:
        _CUDA_AVAILABLE.append(torch.cuda.is_available())
    return _CUDA_AVAILABLE[0]


def _device_capability(index: int) -> Tuple[int, int]:
    # Every eager call of an operator class asks; the property lookup costs a few microseconds.
    cap = _CAPABILITIES.get(index)
    if cap is None:
        cap = _CAPABILITIES[index] = tuple(torch.cuda.get_device_capability(index))
    return cap


@torch.compiler.assume_constant_result  # torch.compile folds it (a string, not a tuple to compare in the graph)
def capability_mismatch(index: Optional[int], lowest: Tuple[int, int], highest: Optional[Tuple[int, int]]) -> str:
    """Why CUDA device `index` is outside [lowest, highest] (highest None: no upper bound), or ""."""
    cap = _device_capability(torch.cuda.current_device() if index is None else index)
    if cap < tuple(lowest):
        return f"requires device with capability >= {tuple(lowest)} but your GPU has capability {cap}"
    if highest is not None and cap > tuple(highest):
        return f"requires a device with capability {tuple(highest)} (Hopper) but your GPU has capability {cap}"
    return ""


_REGISTERED: Set[Tuple[str, str]] = set()  # kernels seen registered (a registration is never undone)


@torch.compiler.assume_constant_result  # a registry lookup: torch.compile folds it instead of breaking the graph
def _kernel_registered(op_name: str, key: str) -> bool:
    # Every eager call of an operator class asks (is_available); the dispatcher lookup costs ~10 us.
    if (op_name, key) in _REGISTERED:
        return True
    try:
        found = torch._C._dispatch_has_kernel_for_dispatch_key(op_name, key)
    except RuntimeError:
        return False
    if found:
        _REGISTERED.add((op_name, key))
    return found


class AttentionOpBase:
    """Backend metadata, availability and support checks."""

    OPERATOR: Any = None
    SUPPORTED_DEVICES: Set[str] = set()
    CUDA_MINIMUM_COMPUTE_CAPABILITY: Tuple[int, int] = (5, 0)
    SUPPORTED_DTYPES: Set[torch.dtype] = set()
    SUPPORTED_MAX_K: float = 0
    SUPPORTED_MIN_K: int = 0
    SUPPORTED_ATTN_BIAS_TYPES: Tuple[Any, ...] = (type(None),)
    SUPPORTS_DROPOUT: bool = False
    SUPPORTS_CUSTOM_SCALE: bool = True
    SUPPORTS_DIFFERENT_VALUE_EMBED: bool = False
    SUPPORTS_OUTPUT_DTYPE: bool = False
    SUPPORTS_PARTIAL: bool = False
    SUPPORTS_BMGHK: bool = False
    IS_DETERMINISTIC: bool = True
    VARLEN_LSE_PACKED: bool = True
    NAME: str = "unknown"
    OPERATOR_CATEGORY: str = "memory_efficient_attention"
    # Why is_available() is False in this build (None: available).
    UNAVAILABLE_REASON: Optional[str] = "no kernel for this backend in this build"

    @classmethod
    def is_available(cls) -> bool:
        return cls.UNAVAILABLE_REASON is None

    @classmethod
    def info(cls) -> str:
        return "available" if cls.is_available() else f"unavailable: {cls.UNAVAILABLE_REASON}"

    @classmethod
    def supports(cls, d: Inputs) -> bool:
        return not cls.not_supported_reasons(d)

    @classmethod
    def shape_not_supported_reasons(cls, Mq: int, Mkv: int, K: int, Kv: int) -> List[str]:
        reasons = []
        if not cls.SUPPORTS_DIFFERENT_VALUE_EMBED and K != Kv:
            reasons.append("query.shape[-1] != value.shape[-1]")
        if max(K, Kv) > cls.SUPPORTED_MAX_K:
            reasons.append(f"max(query.shape[-1], value.shape[-1]) > {cls.SUPPORTED_MAX_K}")
        if min(K, Kv) < cls.SUPPORTED_MIN_K:
            reasons.append(f"embed_dim < {cls.SUPPORTED_MIN_K}")
        return reasons

    @classmethod
    def not_supported_reasons(cls, d: Inputs) -> List[str]:
        reasons: List[str] = []
        if not cls.is_available():
            reasons.append(f"operator is not available: {cls.UNAVAILABLE_REASON}")
        device_type = d.query.device.type
        if device_type not in cls.SUPPORTED_DEVICES:
            reasons.append(f"device={device_type} (supported: {sorted(cls.SUPPORTED_DEVICES)})")
        elif device_type == "cuda" and cuda_available():
            why = capability_mismatch(d.query.device.index, cls.CUDA_MINIMUM_COMPUTE_CAPABILITY, None)
            if why:
                reasons.append(why)
        if d.query.dtype not in cls.SUPPORTED_DTYPES:
            reasons.append(f"dtype={d.query.dtype} (supported: {sorted(map(str, cls.SUPPORTED_DTYPES))})")
        if d.key.dtype != d.query.dtype and not getattr(cls, "SUPPORTS_QUANTIZED_KV", False):
            reasons.append(f"quantized K/V (key dtype {d.key.dtype}) not supported")
        bias_type = type(d.attn_bias)
        if not any(bias_type is t or (t is torch.Tensor and isinstance(d.attn_bias, torch.Tensor))
                   for t in cls.SUPPORTED_ATTN_BIAS_TYPES):
            reasons.append(f"attn_bias type is {bias_type}")
        if d.p != 0.0 and not cls.SUPPORTS_DROPOUT:
            reasons.append("dropout > 0.0")
        if d.scale is not None and not cls.SUPPORTS_CUSTOM_SCALE:
            reasons.append("has custom scale")
        if d.output_dtype is not None and d.output_dtype != d.query.dtype and not cls.SUPPORTS_OUTPUT_DTYPE:
            reasons.append("Custom output dtype not supported")
        if d.is_partial and not cls.SUPPORTS_PARTIAL:
            reasons.append("Partial attention not supported")
        if d.query.ndim == 5 and not cls.SUPPORTS_BMGHK:
            reasons.append("operator does not support BMGHK format")
        reasons += cls.shape_not_supported_reasons(d.query.shape[1], d.key.shape[1], d.query.shape[-1],
                                                   d.value.shape[-1])
        for name, x in (("query", d.query), ("key", d.key), ("value", d.value)):
            if x.shape[-1] > 1 and x.stride(-1) != 1:
                reasons.append(f"{name}.stride(-1) > 1 ({name}.stride() = {x.stride()})")
        return reasons


class AttentionFwOpBase(AttentionOpBase):
    """Forward operator protocol: apply(inp, needs_gradient) -> (out, Context or None)."""

    ERROR_ATOL: Mapping[torch.dtype, float] = {torch.float: 3e-4, torch.half: 4e-3, torch.bfloat16: 2e-2}
    ERROR_RTOL: Mapping[torch.dtype, float] = {torch.float: 2e-5, torch.half: 4e-4, torch.bfloat16: 5e-3}

    @classmethod
    def apply(cls, inp: Inputs, needs_gradient: bool) -> Tuple[torch.Tensor, Optional[Context]]:
        raise NotImplementedError(f"{cls.NAME}: {cls.info()}")


class AttentionBwOpBase(AttentionOpBase):
    """Backward operator protocol: apply(ctx, inp, grad) -> Gradients."""

    SUPPORTS_ATTN_BIAS_GRAD: bool = False
    SUPPORTS_UNPADDED_LSE: bool = False

    @classmethod
    def apply(cls, ctx: Context, inp: Inputs, grad: torch.Tensor) -> Gradients:
        raise NotImplementedError(f"{cls.NAME}: {cls.info()}")


AttentionOp = Tuple[Optional[Type[AttentionFwOpBase]], Optional[Type[AttentionBwOpBase]]]


def bmk2bmhk(tensor: torch.Tensor, num_heads: int) -> torch.Tensor:
    """[B*H, M, K] -> [B, M, H, K]; a 4-D tensor is returned as is."""
    if tensor.ndim == 4:
        return tensor
    return tensor.reshape(-1, num_heads, tensor.shape[1], tensor.shape[2]).permute(0, 2, 1, 3)


def bmghk2bmhk(x: torch.Tensor, x_scale: Optional[torch.Tensor] = None, handle_rep_heads: bool = False
               ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """[B, M, G, H, K] -> [B, M, G*H, K]. With handle_rep_heads and heads expanded (stride 0 along
    H), keeps one head per group: [B, M, G, K]."""
    if x.ndim != 5:
        return x, x_scale
    if handle_rep_heads and x.stride(3) == 0:
        x = x[:, :, :, 0]
        if x_scale is not None and x_scale.ndim == 5:
            x_scale = x_scale[:, :, :, 0]
        return x, x_scale
    B, M, G, H, K = x.shape
    x = x.reshape(B, M, G * H, K)
    if x_scale is not None and x_scale.ndim == 5:
        x_scale = x_scale.reshape(B, M, G * H, x_scale.shape[-1])
    return x, x_scale


def check_lastdim_alignment_stride1(reasons: List[str], name: str, x: torch.Tensor, alignment: int) -> None:
    if x.shape[-1] % alignment != 0:
        reasons.append(f"{name}.shape[-1] % {alignment} != 0")
    elif x.ndim >= 2 and x.stride(-2) % alignment != 0:
        reasons.append(f"{name}.stride(-2) % {alignment} != 0 ({name}.stride() = {x.stride()})")
    if x.stride(-1) > 1:
        reasons.append(f"{name}.stride(-1) > 1 ({name}.stride() = {x.stride()}) - you should call "
                       "`.contiguous()` on the input")


def bmhk2bhk(x: torch.Tensor, x_scale: Optional[torch.Tensor] = None, handle_mqa: bool = True
             ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """[B, M, H, K] -> [B*M, H, K]: the token-major layout of variable-length and paged kernels
    (their inputs are packed into B = 1). With handle_mqa and heads expanded (H > 1, stride 0
    along H), keeps one head, [B*M, 1, K], so the fold stays a view; handle_mqa=False keeps every
    head (a gradient or output must keep the query's shape). x_scale ([B, M, H] or [B, M, H, S],
    the per-row scales of a quantized K/V) follows the same fold. Other ranks are returned as is."""
    if x.ndim != 4:
        return x, x_scale
    B, M, H, K = x.shape
    mqa = handle_mqa and H > 1 and x.stride(2) == 0
    if mqa:
        x = x[:, :, :1]
    x = x.reshape(B * M, x.shape[2], K)
    if x_scale is not None:
        if x_scale.ndim not in (3, 4) or tuple(x_scale.shape[:3]) != (B, M, H):
            raise ValueError(f"x_scale must have shape [B, M, H] or [B, M, H, S] matching x {(B, M, H, K)}; "
                             f"got {tuple(x_scale.shape)}")
        if mqa:
            x_scale = x_scale[:, :, :1]
        x_scale = x_scale.reshape(B * M, *x_scale.shape[2:])
    return x, x_scale


class ScaledTensor(torch.Tensor):
    """Quantized storage (a tensor of its own dtype, usually FP8) that carries its dequantization
    scale: dequantize() is dequant_func(data, scale) in original_dtype. Operations on it return
    plain tensors of the storage (the scale does not follow a slice or a reshape)."""

    __slots__ = ["scale", "dequant_func", "original_dtype"]
    __torch_function__ = torch._C._disabled_torch_function_impl

    def __new__(cls, data: torch.Tensor, scale: torch.Tensor, dequant_func: Callable[[torch.Tensor, torch.Tensor],
                torch.Tensor], original_dtype: torch.dtype, require_grad: bool = False) -> "ScaledTensor":
        if not isinstance(data, torch.Tensor):
            raise TypeError(f"ScaledTensor: data must be a tensor, got {type(data).__name__}")
        if not isinstance(scale, torch.Tensor):
            raise TypeError(f"ScaledTensor: scale must be a tensor, got {type(scale).__name__}")
        if not callable(dequant_func):
            raise TypeError(f"ScaledTensor: dequant_func must be callable, got {type(dequant_func).__name__}")
        if not isinstance(original_dtype, torch.dtype):
            raise TypeError(f"ScaledTensor: original_dtype must be a torch.dtype, got {original_dtype!r}")
        if isinstance(data, ScaledTensor):
            data = data.unpack()[0]
        instance = torch.Tensor._make_subclass(cls, data, require_grad)
        instance.scale = scale
        instance.dequant_func = dequant_func
        instance.original_dtype = original_dtype
        return instance

    def unpack(self) -> Tuple[torch.Tensor, torch.Tensor]:
        """(storage as a plain tensor sharing this one's memory, scale)."""
        return torch.Tensor.as_subclass(self, torch.Tensor), self.scale

    def dequantize(self) -> torch.Tensor:
        data, scale = self.unpack()
        return self.dequant_func(data, scale).to(self.original_dtype)

    def __repr__(self) -> str:
        data, scale = self.unpack()
        return (f"ScaledTensor(shape={tuple(data.shape)}, dtype={data.dtype}, scale shape={tuple(scale.shape)}, "
                f"original_dtype={self.original_dtype}, device={data.device})")

    def __reduce_ex__(self, protocol):  # pickle keeps the subclass and its scale
        data, scale = self.unpack()
        return (_rebuild_scaled_tensor, (data, scale, self.dequant_func, self.original_dtype, self.requires_grad))

    def __deepcopy__(self, memo) -> "ScaledTensor":
        data, scale = self.unpack()
        return ScaledTensor(data.detach().clone(), scale.clone(), self.dequant_func, self.original_dtype,
                            self.requires_grad)


def _rebuild_scaled_tensor(data, scale, dequant_func, original_dtype, require_grad) -> ScaledTensor:
    return ScaledTensor(data, scale, dequant_func, original_dtype, require_grad)


_FP8_DTYPES = tuple(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
                    if hasattr(torch, n))


class _PerHeadDequant:
    """dequant_func of pack_fp8_tensorwise_per_head: data * scale[b, heads] in float32 (a class,
    not a closure, so a packed tensor pickles)."""

    def __call__(self, data: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        shape = (data.shape[0], 1, *data.shape[2:-1], 1)
        return data.to(torch.float32) * scale.to(torch.float32).reshape(shape)


def pack_fp8_tensorwise_per_head(x: torch.Tensor, scale: Union[torch.Tensor, float], original_dtype) -> ScaledTensor:
    """FP8 q/k/v storage x ([B, M, H, K], [B, M, G, H, K] or [B, M, K]) with its dequantization
    scale (a multiplier: x ~= data * scale): a float or one-element tensor (tensorwise) or a tensor
    broadcasting to [B, H] / [B, G, H] / [B] (per head). The scale is stored as float32 of exactly
    that per-head shape, the layout of FP8 attention's descale_q/k/v."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"pack_fp8_tensorwise_per_head: x must be a tensor, got {type(x).__name__}")
    if x.dtype not in _FP8_DTYPES:
        raise TypeError(f"pack_fp8_tensorwise_per_head: x must be an FP8 tensor, got dtype {x.dtype}")
    if x.ndim not in (3, 4, 5):
        raise ValueError(f"pack_fp8_tensorwise_per_head: x must be [B, M, K], [B, M, H, K] or [B, M, G, H, K]; "
                         f"got shape {tuple(x.shape)}")
    if not isinstance(original_dtype, torch.dtype) or not original_dtype.is_floating_point:
        raise TypeError(f"pack_fp8_tensorwise_per_head: original_dtype must be a floating torch.dtype, "
                        f"got {original_dtype!r}")
    head_shape = (x.shape[0], *x.shape[2:-1])
    if isinstance(scale, torch.Tensor):
        if scale.device != x.device:
            raise ValueError(f"pack_fp8_tensorwise_per_head: scale is on {scale.device} but x is on {x.device}")
        if not scale.is_floating_point():
            raise TypeError(f"pack_fp8_tensorwise_per_head: scale must be a float tensor, got dtype {scale.dtype}")
        s = scale.reshape(()) if scale.numel() == 1 else scale
        try:
            s = s.to(torch.float32).expand(head_shape)
        except RuntimeError:
            raise ValueError(f"pack_fp8_tensorwise_per_head: scale of shape {tuple(scale.shape)} is neither one "
                             f"value nor per head {head_shape}") from None
    elif isinstance(scale, (int, float)) and not isinstance(scale, bool):
        s = torch.full(head_shape, float(scale), dtype=torch.float32, device=x.device)
    else:
        raise TypeError(f"pack_fp8_tensorwise_per_head: scale must be a float or a tensor, got {type(scale).__name__}")
    return ScaledTensor(x, s.contiguous(), _PerHeadDequant(), original_dtype)
