"""Attention biases and masks (spec group "Attention - Biases & masks").

Each class describes a mask without materializing the Mq x Mkv matrix; `materialize(shape, dtype,
device)` builds the dense additive bias (0 where a key is allowed, -inf where it is masked). That
dense form is the test oracle and what the reference forward operator consumes.

Conventions (see shared/spec/CONTRACTS.md, "Masks"):
- LowerTriangularMask is top-left causal: key j allowed iff j <= i.
- `*FromBottomRight` variants shift the diagonal by shift = Mkv - Mq: allowed iff j - i <= shift.
- Causal local window w (w keys including the diagonal): additionally j - i >= shift - w + 1
  (shift = 0 for top-left).
- Non-causal local (window_left, window_right), bottom-right aligned: allowed iff
  shift - window_left <= j - i <= shift + window_right.
- BlockDiagonal*: sequences packed into batch 1; seqinfo.seqstart is the int32 cumulative
  [0, l0, l0+l1, ...]. The per-block mask is applied between matching Q and K/V blocks.
- PaddedKeys: K/V lane b starts at b * padding, only seqlen[b] keys of it are valid.
- Gappy: K/V lane b starts at seqstart[b] (B+1 entries), seqlen[b] keys valid.
- Paged: logical lane b (notional length block_tables.shape[1] * page_size) is mapped page by page
  to physical K/V [1, physical_pages * page_size, H, D] through block_tables [B, max_pages].
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from typing import Any, Iterable, List, Optional, Sequence, Tuple, Type, Union

import torch

__all__ = [
    "AttentionBias", "LowerTriangularMask", "LowerTriangularMaskWithTensorBias",
    "LowerTriangularFromBottomRightMask", "LowerTriangularFromBottomRightLocalAttentionMask",
    "LocalAttentionFromBottomRightMask", "BlockDiagonalMask", "BlockDiagonalCausalMask",
    "BlockDiagonalCausalFromBottomRightMask", "BlockDiagonalCausalLocalAttentionMask",
    "BlockDiagonalCausalLocalAttentionFromBottomRightMask", "BlockDiagonalPaddedKeysMask",
    "BlockDiagonalCausalWithOffsetPaddedKeysMask", "BlockDiagonalLocalAttentionPaddedKeysMask",
    "BlockDiagonalCausalLocalAttentionPaddedKeysMask", "PagedBlockDiagonalPaddedKeysMask",
    "PagedBlockDiagonalCausalWithOffsetPaddedKeysMask", "PagedBlockDiagonalCausalLocalPaddedKeysMask",
    "BlockDiagonalGappyKeysMask", "BlockDiagonalLocalAttentionFromBottomRightGappyKeysMask",
    "BlockDiagonalCausalWithOffsetGappyKeysMask", "PagedBlockDiagonalGappyKeysMask",
    "PagedBlockDiagonalCausalWithOffsetGappyKeysMask", "VARLEN_BIASES",
]


# ---- per-block mask kinds ---------------------------------------------------------------------
# A block mask kind is (causal, bottom_right, window_left, window_right, window_size); the allowed
# set inside a (mq, mkv) block is computed by `_block_allowed`.

def _block_allowed(mq: int, mkv: int, *, causal: bool, bottom_right: bool, window: int = 0,
                   window_left: Optional[int] = None, window_right: Optional[int] = None,
                   device=None) -> torch.Tensor:
    """Boolean [mq, mkv]: True where query i may attend key j."""
    i = torch.arange(mq, device=device).unsqueeze(1)
    j = torch.arange(mkv, device=device).unsqueeze(0)
    shift = (mkv - mq) if bottom_right else 0
    d = j - i
    allowed = torch.ones(mq, mkv, dtype=torch.bool, device=device)
    if causal:
        allowed &= d <= shift
        if window > 0:
            allowed &= d >= shift - window + 1
    if window_left is not None:
        allowed &= d >= shift - window_left
    if window_right is not None:
        allowed &= d <= shift + window_right
    return allowed


def _to_bias(allowed: torch.Tensor, shape, dtype, device) -> torch.Tensor:
    bias = torch.zeros(allowed.shape, dtype=dtype, device=device)
    bias.masked_fill_(~allowed.to(device), -math.inf)
    return bias.expand(tuple(shape)).contiguous() if tuple(shape) != tuple(bias.shape) else bias


def _check_shape(shape) -> Tuple[int, int]:
    shape = tuple(shape)
    if len(shape) < 2:
        raise ValueError(f"materialize: shape must have at least 2 dims (..., Mq, Mkv), got {shape}")
    return shape[-2], shape[-1]


def _as_int(name: str, value: Any) -> int:
    """Python int from any integer-like (int, numpy integer, 0-d integer tensor); bools and floats
    raise TypeError."""
    if isinstance(value, bool) or (isinstance(value, torch.Tensor) and value.dtype == torch.bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None


def _positive_int(name: str, value: Any) -> int:
    try:
        out = _as_int(name, value)
    except TypeError:
        out = 0
    if out <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return out


def _check_window(name: str, value: Any, allow_zero: bool = False) -> int:
    value = _as_int(name, value)
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'non-negative' if allow_zero else 'positive'}, got {value}")
    return value


class AttentionBias:
    """Base of every optimized bias. Subclasses implement `materialize` (and `to` where they
    store tensors)."""

    HOLDS_DENSE_TENSOR = False

    def materialize(self, shape: Tuple[int, ...], dtype: torch.dtype = torch.float32,
                    device: Union[str, torch.device] = "cpu") -> torch.Tensor:
        raise NotImplementedError

    def to(self, device) -> "AttentionBias":
        return self


# ---- dense-shape masks --------------------------------------------------------------------------

class LowerTriangularMask(AttentionBias):
    """Top-left causal: key j allowed iff j <= i. `device` is accepted for compatibility, ignored."""

    def __init__(self, *tensor_args, device: Optional[torch.device] = None, **tensor_kwargs) -> None:
        pass

    def materialize(self, shape, dtype=torch.float32, device="cpu"):
        mq, mkv = _check_shape(shape)
        return _to_bias(_block_allowed(mq, mkv, causal=True, bottom_right=False), shape, dtype, device)

    def add_bias(self, bias: torch.Tensor) -> "LowerTriangularMaskWithTensorBias":
        return LowerTriangularMaskWithTensorBias(bias)

    def __eq__(self, other):
        return type(self) is type(other)

    __hash__ = object.__hash__


class LowerTriangularMaskWithTensorBias(LowerTriangularMask):
    """Top-left causal mask plus a dense additive bias (broadcastable to [B, H, Mq, Mkv])."""

    HOLDS_DENSE_TENSOR = True

    def __init__(self, bias: torch.Tensor) -> None:
        if not isinstance(bias, torch.Tensor):
            raise TypeError(f"bias must be a tensor, got {type(bias).__name__}")
        self._bias = bias

    def materialize(self, shape, dtype=torch.float32, device="cpu"):
        causal = super().materialize(shape, dtype, device)
        return causal + self._bias.to(device=device, dtype=dtype)

    def to(self, device):
        return LowerTriangularMaskWithTensorBias(self._bias.to(device))

    def __eq__(self, other):
        return type(self) is type(other) and self._bias is other._bias

    __hash__ = object.__hash__


@dataclass(eq=True)
class LowerTriangularFromBottomRightMask(AttentionBias):
    """Causal mask aligned to the bottom-right corner: allowed iff j - i <= Mkv - Mq."""

    def materialize(self, shape, dtype=torch.float32, device="cpu"):
        mq, mkv = _check_shape(shape)
        return _to_bias(_block_allowed(mq, mkv, causal=True, bottom_right=True), shape, dtype, device)

    def make_local_attention(self, window_size: int) -> "LowerTriangularFromBottomRightLocalAttentionMask":
        return LowerTriangularFromBottomRightLocalAttentionMask(window_size)


@dataclass(eq=True)
class LowerTriangularFromBottomRightLocalAttentionMask(LowerTriangularFromBottomRightMask):
    """Bottom-right causal with a window of `_window_size` keys (diagonal included)."""

    _window_size: int = 0

    def __post_init__(self) -> None:
        self._window_size = _check_window("_window_size", self._window_size)

    def materialize(self, shape, dtype=torch.float32, device="cpu"):
        mq, mkv = _check_shape(shape)
        allowed = _block_allowed(mq, mkv, causal=True, bottom_right=True, window=self._window_size)
        return _to_bias(allowed, shape, dtype, device)


@dataclass(eq=True)
class LocalAttentionFromBottomRightMask(AttentionBias):
    """Non-causal window: allowed iff q - window_left <= k + s <= q + window_right, s = Mq - Mkv."""

    window_left: int
    window_right: int

    def __post_init__(self) -> None:
        self.window_left = _check_window("window_left", self.window_left, allow_zero=True)
        self.window_right = _check_window("window_right", self.window_right, allow_zero=True)

    def materialize(self, shape, dtype=torch.float32, device="cpu"):
        mq, mkv = _check_shape(shape)
        allowed = _block_allowed(mq, mkv, causal=False, bottom_right=True,
                                 window_left=self.window_left, window_right=self.window_right)
        return _to_bias(allowed, shape, dtype, device)


# ---- sequence metadata ----------------------------------------------------------------------------

def _as_int_list(name: str, values) -> List[int]:
    if isinstance(values, torch.Tensor):
        values = values.tolist()
    return [_as_int(f"{name} entries", v) for v in values]


@dataclass
class _SeqLenInfo:
    """Packed sequences: seqstart is the int32 cumulative [0, l0, l0+l1, ...] (B+1 entries)."""

    seqstart: torch.Tensor
    max_seqlen: int
    min_seqlen: int
    seqstart_py: List[int]

    def to(self, device) -> "_SeqLenInfo":
        if self.seqstart.device == torch.device(device):
            return self
        return _SeqLenInfo(self.seqstart.to(device), self.max_seqlen, self.min_seqlen, self.seqstart_py)

    def intervals(self) -> Iterable[Tuple[int, int]]:
        yield from zip(self.seqstart_py, self.seqstart_py[1:])

    @property
    def seqlen_py(self) -> List[int]:
        return [e - s for s, e in self.intervals()]

    @property
    def total(self) -> int:
        return self.seqstart_py[-1]

    @classmethod
    def from_seqlens(cls, seqlens: Iterable[int], *, device=None) -> "_SeqLenInfo":
        lens = _as_int_list("seqlens", seqlens)
        if len(lens) == 0:
            raise ValueError("seqlens must hold at least one sequence")
        if any(x < 0 for x in lens):
            raise ValueError(f"seqlens must be non-negative, got {lens}")
        starts = [0]
        for x in lens:
            starts.append(starts[-1] + x)
        if starts[-1] >= 2**31:
            raise ValueError("total sequence length does not fit in int32")
        return cls(seqstart=torch.tensor(starts, dtype=torch.int32, device=device),
                   max_seqlen=max(lens), min_seqlen=min(lens), seqstart_py=starts)

    def split(self, x: torch.Tensor, batch_sizes: Optional[Sequence[int]] = None) -> List[torch.Tensor]:
        if x.ndim < 2 or x.shape[0] != 1:
            raise ValueError(f"split expects a packed tensor of shape [1, total, ...], got {tuple(x.shape)}")
        if x.shape[1] != self.total:
            raise ValueError(f"split: tensor has {x.shape[1]} rows but the sequences total {self.total}")
        seqs = [x[:, s:e] for s, e in self.intervals()]
        if batch_sizes is None:
            return seqs
        out, i = [], 0
        for bs in batch_sizes:
            out.append(torch.cat(seqs[i:i + bs], dim=0))
            i += bs
        return out


@dataclass
class _PaddedSeqLenInfo(_SeqLenInfo):
    """Padded K/V lanes: lane b is [b * padding, b * padding + seqlen[b])."""

    seqlen: torch.Tensor = None  # type: ignore[assignment]
    seqlen_py_: List[int] = field(default_factory=list)
    padding: int = 0

    def intervals(self):
        for start, length in zip(self.seqstart_py, self.seqlen_py_):
            yield start, start + length

    @property
    def seqlen_py(self):
        return list(self.seqlen_py_)

    @property
    def total(self) -> int:
        return len(self.seqlen_py_) * self.padding

    def to(self, device):
        if self.seqstart.device == torch.device(device):
            return self
        return _PaddedSeqLenInfo(self.seqstart.to(device), self.max_seqlen, self.min_seqlen, self.seqstart_py,
                                 self.seqlen.to(device), self.seqlen_py_, self.padding)

    @classmethod
    def from_seqlens_padded(cls, seqlens, padding: int, *, device=None) -> "_PaddedSeqLenInfo":
        lens = _as_int_list("kv_seqlen", seqlens)
        if len(lens) == 0:
            raise ValueError("kv_seqlen must hold at least one sequence")
        padding = _positive_int("kv_padding", padding)
        for b, x in enumerate(lens):
            if x < 0 or x > padding:
                raise ValueError(f"kv_seqlen[{b}]={x} must lie in [0, kv_padding={padding}]")
        starts = list(range(0, len(lens) * padding + 1, padding))
        return cls(seqstart=torch.tensor(starts, dtype=torch.int32, device=device), max_seqlen=max(lens),
                   min_seqlen=min(lens), seqstart_py=starts,
                   seqlen=torch.tensor(lens, dtype=torch.int32, device=device), seqlen_py_=lens, padding=padding)

    def split(self, x, batch_sizes=None):
        raise NotImplementedError("split of padded K/V lanes is not supported")


@dataclass
class _GappySeqInfo(_SeqLenInfo):
    """Gappy K/V lanes: lane b is [seqstart[b], seqstart[b] + seqlen[b]); B+1 starts. When
    `paged`, the starts are offsets inside each batch element's notional (logical) lane."""

    seqlen: torch.Tensor = None  # type: ignore[assignment]
    seqlen_py_: List[int] = field(default_factory=list)
    paged: bool = False

    def intervals(self):
        for start, length in zip(self.seqstart_py, self.seqlen_py_):
            yield start, start + length

    @property
    def seqlen_py(self):
        return list(self.seqlen_py_)

    @property
    def total(self) -> int:
        return self.seqstart_py[-1]

    def to(self, device):
        if self.seqstart.device == torch.device(device):
            return self
        return _GappySeqInfo(self.seqstart.to(device), self.max_seqlen, self.min_seqlen, self.seqstart_py,
                             self.seqlen.to(device), self.seqlen_py_, self.paged)

    @classmethod
    def from_seqlens_gappy(cls, seqstarts, seqlens, paged: bool = False, *, device=None) -> "_GappySeqInfo":
        starts = _as_int_list("kv_seqstarts", seqstarts)
        lens = _as_int_list("kv_seqlen", seqlens)
        if len(lens) == 0:
            raise ValueError("kv_seqlen must hold at least one sequence")
        if len(starts) != len(lens) + 1:
            raise ValueError(f"kv_seqstarts needs len(kv_seqlen) + 1 = {len(lens) + 1} entries, got {len(starts)}")
        for b, (s, x) in enumerate(zip(starts, lens)):
            if s < 0 or x < 0:
                raise ValueError(f"kv_seqstarts[{b}]={s} and kv_seqlen[{b}]={x} must be non-negative")
            if not paged and s + x > starts[-1]:
                raise ValueError(f"lane {b} [{s}, {s + x}) runs past the end of K/V ({starts[-1]})")
        return cls(seqstart=torch.tensor(starts, dtype=torch.int32, device=device), max_seqlen=max(lens),
                   min_seqlen=min(lens), seqstart_py=starts,
                   seqlen=torch.tensor(lens, dtype=torch.int32, device=device), seqlen_py_=lens, paged=paged)

    def split(self, x, batch_sizes=None):
        raise NotImplementedError("split of gappy K/V lanes is not supported")


# ---- block-diagonal masks -------------------------------------------------------------------------

class _BlockDiagonalBase(AttentionBias):
    """Shared materialization: per (Q block, K/V lane) pair, the block mask of `_block_kwargs()`."""

    q_seqinfo: _SeqLenInfo
    k_seqinfo: _SeqLenInfo

    def __post_init__(self) -> None:
        self._validate_pairs()

    def to(self, device):
        return type(self)(**{**self.__dict__, "q_seqinfo": self.q_seqinfo.to(device),
                             "k_seqinfo": self.k_seqinfo.to(device)})

    def _block_kwargs(self) -> dict:
        return dict(causal=False, bottom_right=False)

    def _validate_pairs(self) -> None:
        nq, nk = len(self.q_seqinfo.seqstart_py) - 1, len(self.k_seqinfo.seqlen_py)
        if nq != nk:
            raise ValueError(f"{type(self).__name__}: {nq} query sequences but {nk} key/value sequences")

    def _kv_total(self) -> int:
        return self.k_seqinfo.total

    def _allowed_2d(self, device=None) -> torch.Tensor:
        mq, mkv = self.q_seqinfo.total, self._kv_total()
        allowed = torch.zeros(mq, mkv, dtype=torch.bool, device=device)
        kw = self._block_kwargs()
        for (qs, qe), (ks, ke) in zip(self.q_seqinfo.intervals(), self.k_seqinfo.intervals()):
            allowed[qs:qe, ks:ke] = _block_allowed(qe - qs, ke - ks, device=device, **kw)
        return allowed

    def materialize(self, shape, dtype=torch.float32, device="cpu"):
        mq, mkv = _check_shape(shape)
        if mq != self.q_seqinfo.total or mkv != self._kv_total():
            raise ValueError(f"{type(self).__name__}.materialize: shape {tuple(shape)} must end with "
                             f"(Mq, Mkv) = ({self.q_seqinfo.total}, {self._kv_total()})")
        return _to_bias(self._allowed_2d(device), shape, dtype, device)

    def split_queries(self, tensor: torch.Tensor) -> List[torch.Tensor]:
        return self.q_seqinfo.split(tensor, getattr(self, "_batch_sizes", None))

    def __eq__(self, other):
        return (type(self) is type(other) and self.q_seqinfo.seqstart_py == other.q_seqinfo.seqstart_py
                and self.k_seqinfo.seqstart_py == other.k_seqinfo.seqstart_py
                and self.k_seqinfo.seqlen_py == other.k_seqinfo.seqlen_py
                and self._block_kwargs() == other._block_kwargs())

    __hash__ = object.__hash__


class _CausalWindow:
    """Mixin, listed before a _BlockDiagonalBase dataclass that declares `_window_size: int = 0`: a causal
    window of `_window_size` keys, anchored bottom-right unless _WINDOW_FROM_BOTTOM_RIGHT is False."""

    _WINDOW_FROM_BOTTOM_RIGHT = True

    def __post_init__(self) -> None:
        super().__post_init__()
        self._window_size = _check_window("_window_size", self._window_size)

    def _block_kwargs(self):
        return dict(causal=True, bottom_right=self._WINDOW_FROM_BOTTOM_RIGHT, window=self._window_size)


class _LeftRightWindow:
    """Mixin, listed before a _BlockDiagonalBase dataclass that declares `window_left: int = 0` and
    `window_right: int = 0`: a non-causal bottom-right window (window_left, window_right)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.window_left = _check_window("window_left", self.window_left, allow_zero=True)
        self.window_right = _check_window("window_right", self.window_right, allow_zero=True)

    def _block_kwargs(self):
        return dict(causal=False, bottom_right=True, window_left=self.window_left, window_right=self.window_right)


def _padded_infos(q_seqlen, kv_padding, kv_seqlen, device) -> Tuple[_SeqLenInfo, _PaddedSeqLenInfo]:
    return (_SeqLenInfo.from_seqlens(q_seqlen, device=device),
            _PaddedSeqLenInfo.from_seqlens_padded(kv_seqlen, kv_padding, device=device))


def _gappy_infos(q_seqlen, kv_seqstarts, kv_seqlen, device) -> Tuple[_SeqLenInfo, _GappySeqInfo]:
    return (_SeqLenInfo.from_seqlens(q_seqlen, device=device),
            _GappySeqInfo.from_seqlens_gappy(kv_seqstarts, kv_seqlen, False, device=device))


def _as_paged(mask: "_BlockDiagonalBase", paged_type: Type["_PagedBase"], k: _SeqLenInfo,
              block_tables: torch.Tensor, page_size: int) -> "_PagedBase":
    extra = {f: getattr(mask, f) for f in getattr(paged_type, "_EXTRA_FIELDS", ())}
    return paged_type(q_seqinfo=mask.q_seqinfo, k_seqinfo=k, block_tables=block_tables, page_size=page_size, **extra)


@dataclass(eq=False)
class BlockDiagonalMask(_BlockDiagonalBase):
    """Packed independent sequences: Q block b attends K/V block b only (non-causal)."""

    q_seqinfo: _SeqLenInfo
    k_seqinfo: _SeqLenInfo
    _batch_sizes: Optional[Sequence[int]] = None

    @classmethod
    def from_seqlens(cls, q_seqlen: Sequence[int], kv_seqlen: Optional[Sequence[int]] = None, *,
                     device=None) -> "BlockDiagonalMask":
        q = _SeqLenInfo.from_seqlens(q_seqlen, device=device)
        if kv_seqlen is None or _as_int_list("kv_seqlen", kv_seqlen) == q.seqlen_py:
            k = q
        else:
            k = _SeqLenInfo.from_seqlens(kv_seqlen, device=device)
        return cls(q_seqinfo=q, k_seqinfo=k)

    @classmethod
    def from_tensor_list(cls, tensors: Sequence[torch.Tensor]) -> Tuple["BlockDiagonalMask", torch.Tensor]:
        if len(tensors) == 0:
            raise ValueError("from_tensor_list needs at least one tensor")
        batch_sizes = [t.shape[0] for t in tensors]
        seqlens = [t.shape[1] for t in tensors for _ in range(t.shape[0])]
        info = _SeqLenInfo.from_seqlens(seqlens)
        mask = cls(q_seqinfo=info, k_seqinfo=info, _batch_sizes=batch_sizes)
        packed = torch.cat([t.reshape(1, -1, *t.shape[2:]) for t in tensors], dim=1)
        return mask, packed

    @classmethod
    def from_tensor_lists_qkv(cls, tensors_q: Sequence[torch.Tensor], tensors_k: Sequence[torch.Tensor],
                              tensors_v: Optional[Sequence[torch.Tensor]] = None):
        if len(tensors_q) != len(tensors_k) or (tensors_v is not None and len(tensors_v) != len(tensors_q)):
            raise ValueError("tensors_q, tensors_k (and tensors_v) must have the same length")
        batch_sizes = [t.shape[0] for t in tensors_q]
        for tq, tk in zip(tensors_q, tensors_k):
            if tk.shape[0] != tq.shape[0]:
                raise ValueError("matching q and k tensors must have the same batch size")
        q_info = _SeqLenInfo.from_seqlens([t.shape[1] for t in tensors_q for _ in range(t.shape[0])])
        k_info = _SeqLenInfo.from_seqlens([t.shape[1] for t in tensors_k for _ in range(t.shape[0])])
        mask = cls(q_seqinfo=q_info, k_seqinfo=k_info, _batch_sizes=batch_sizes)

        def pack(ts):
            return torch.cat([t.reshape(1, -1, *t.shape[2:]) for t in ts], dim=1)

        return mask, pack(tensors_q), pack(tensors_k), (pack(tensors_v) if tensors_v is not None else None)

    def split_kv(self, tensor: torch.Tensor) -> List[torch.Tensor]:
        return self.k_seqinfo.split(tensor, self._batch_sizes)

    def split(self, tensor: torch.Tensor) -> List[torch.Tensor]:
        if self.q_seqinfo.seqstart_py != self.k_seqinfo.seqstart_py:
            raise ValueError("split() needs identical query and key/value sequences; use split_queries/split_kv")
        return self.split_queries(tensor)

    def _derive(self, cls_, **extra):
        return cls_(q_seqinfo=self.q_seqinfo, k_seqinfo=self.k_seqinfo, _batch_sizes=self._batch_sizes, **extra)

    def make_causal(self) -> "BlockDiagonalCausalMask":
        return self._derive(BlockDiagonalCausalMask)

    def make_causal_from_bottomright(self) -> "BlockDiagonalCausalFromBottomRightMask":
        return self._derive(BlockDiagonalCausalFromBottomRightMask)

    def make_local_attention(self, window_size: int) -> "BlockDiagonalCausalLocalAttentionMask":
        return self._derive(BlockDiagonalCausalLocalAttentionMask, _window_size=window_size)

    def make_local_attention_from_bottomright(
            self, window_size: int) -> "BlockDiagonalCausalLocalAttentionFromBottomRightMask":
        return self._derive(BlockDiagonalCausalLocalAttentionFromBottomRightMask, _window_size=window_size)


@dataclass(eq=False)
class BlockDiagonalCausalMask(BlockDiagonalMask):
    """Top-left causal inside every block."""

    def _block_kwargs(self):
        return dict(causal=True, bottom_right=False)


@dataclass(eq=False)
class BlockDiagonalCausalFromBottomRightMask(BlockDiagonalMask):
    """Bottom-right causal inside every block; each K/V block must be at least as long as its Q block."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for b, (lq, lk) in enumerate(zip(self.q_seqinfo.seqlen_py, self.k_seqinfo.seqlen_py)):
            if lk < lq:
                raise ValueError(f"{type(self).__name__}: K/V block {b} has {lk} keys, fewer than its "
                                 f"{lq} queries (each K/V block must be at least as long as its Q block)")

    def _block_kwargs(self):
        return dict(causal=True, bottom_right=True)


@dataclass(eq=False)
class BlockDiagonalCausalLocalAttentionMask(_CausalWindow, BlockDiagonalCausalMask):
    """Top-left causal window of `_window_size` keys inside every block."""

    _window_size: int = 0
    _WINDOW_FROM_BOTTOM_RIGHT = False


@dataclass(eq=False)
class BlockDiagonalCausalLocalAttentionFromBottomRightMask(_CausalWindow, BlockDiagonalCausalFromBottomRightMask):
    """Bottom-right causal window of `_window_size` keys inside every block."""

    _window_size: int = 0


# ---- padded keys ----------------------------------------------------------------------------------

@dataclass(eq=False)
class BlockDiagonalPaddedKeysMask(_BlockDiagonalBase):
    """Packed Q blocks attending padded K/V lanes (lane b starts at b * padding), non-causal."""

    q_seqinfo: _SeqLenInfo
    k_seqinfo: _PaddedSeqLenInfo

    @classmethod
    def from_seqlens(cls, q_seqlen, kv_padding: int, kv_seqlen, causal_diagonal: Any = None, *, device=None):
        # causal_diagonal exists for compatibility and is unused.
        q, k = _padded_infos(q_seqlen, kv_padding, kv_seqlen, device)
        return cls(q_seqinfo=q, k_seqinfo=k)

    def make_paged(self, block_tables: torch.Tensor, page_size: int, paged_type: Type["_PagedBase"]):
        if paged_type is None:
            raise ValueError("make_paged needs paged_type")
        k = _PaddedSeqLenInfo.from_seqlens_padded(self.k_seqinfo.seqlen_py, block_tables.shape[1] * page_size,
                                                  device=self.k_seqinfo.seqstart.device)
        return _as_paged(self, paged_type, k, block_tables, page_size)

    def make_local_attention(self, window_left: int, window_right: int):
        return BlockDiagonalLocalAttentionPaddedKeysMask(self.q_seqinfo, self.k_seqinfo, window_left, window_right)


@dataclass(eq=False)
class BlockDiagonalCausalWithOffsetPaddedKeysMask(BlockDiagonalPaddedKeysMask):
    """Bottom-right causal over padded lanes (the decode mask). causal_diagonal is unused."""

    causal_diagonal: Any = None

    def _block_kwargs(self):
        return dict(causal=True, bottom_right=True)


@dataclass(eq=False)
class BlockDiagonalLocalAttentionPaddedKeysMask(_LeftRightWindow, BlockDiagonalPaddedKeysMask):
    """Non-causal bottom-right local window (window_left, window_right) over padded lanes."""

    window_left: int = 0
    window_right: int = 0

    @classmethod
    def from_seqlens_local(cls, q_seqlen, kv_padding, kv_seqlen, window_left, window_right, *, device=None):
        q, k = _padded_infos(q_seqlen, kv_padding, kv_seqlen, device)
        return cls(q_seqinfo=q, k_seqinfo=k, window_left=window_left, window_right=window_right)


@dataclass(eq=False)
class BlockDiagonalCausalLocalAttentionPaddedKeysMask(_CausalWindow, BlockDiagonalPaddedKeysMask):
    """Bottom-right causal window of `_window_size` keys over padded lanes."""

    _window_size: int = 0

    @classmethod
    def from_seqlens_local(cls, q_seqlen, kv_padding, kv_seqlen, window_size, *, device=None):
        q, k = _padded_infos(q_seqlen, kv_padding, kv_seqlen, device)
        return cls(q_seqinfo=q, k_seqinfo=k, _window_size=window_size)


# ---- gappy keys -----------------------------------------------------------------------------------

@dataclass(eq=False)
class BlockDiagonalGappyKeysMask(_BlockDiagonalBase):
    """K/V lanes at arbitrary starts (kv_seqstarts, B+1 entries) with independent lengths."""

    q_seqinfo: _SeqLenInfo
    k_seqinfo: _GappySeqInfo

    @classmethod
    def from_seqlens(cls, q_seqlen, kv_seqstarts, kv_seqlen, *, device=None):
        q, k = _gappy_infos(q_seqlen, kv_seqstarts, kv_seqlen, device)
        return cls(q_seqinfo=q, k_seqinfo=k)

    def make_paged(self, block_tables: torch.Tensor, page_size: int, notional_padding: int,
                   paged_type: Type["_PagedBase"]):
        """Lane b of the unpaged layout starts at b * notional_padding + offset; the paged mask keeps
        the offsets (relative to each lane's notional block of block_tables.shape[1] * page_size)."""
        if paged_type is None:
            raise ValueError("make_paged needs paged_type")
        row = block_tables.shape[1] * page_size
        starts = self.k_seqinfo.seqstart_py
        lens = self.k_seqinfo.seqlen_py
        offsets = [s - b * notional_padding for b, s in enumerate(starts[:-1])]
        for b, (o, x) in enumerate(zip(offsets, lens)):
            if o < 0 or o + x > row:
                raise ValueError(f"lane {b}: offset {o} + length {x} does not fit a notional block of {row} keys")
        k = _GappySeqInfo.from_seqlens_gappy(offsets + [row], lens, True, device=self.k_seqinfo.seqstart.device)
        return _as_paged(self, paged_type, k, block_tables, page_size)


@dataclass(eq=False)
class BlockDiagonalCausalWithOffsetGappyKeysMask(BlockDiagonalGappyKeysMask):
    """Bottom-right causal over gappy lanes."""

    def _block_kwargs(self):
        return dict(causal=True, bottom_right=True)


@dataclass(eq=False)
class BlockDiagonalLocalAttentionFromBottomRightGappyKeysMask(_LeftRightWindow, BlockDiagonalGappyKeysMask):
    """Non-causal bottom-right local window over gappy lanes."""

    window_left: int = 0
    window_right: int = 0

    @classmethod
    def from_seqlens_local_gappy(cls, q_seqlen, kv_seqstarts, kv_seqlen, window_left, window_right, device=None):
        q, k = _gappy_infos(q_seqlen, kv_seqstarts, kv_seqlen, device)
        return cls(q_seqinfo=q, k_seqinfo=k, window_left=window_left, window_right=window_right)


# ---- paged ----------------------------------------------------------------------------------------

class _PagedBase(_BlockDiagonalBase):
    """Logical lane b (notional length block_tables.shape[1] * page_size) mapped page by page onto
    physical K/V. materialize(shape) takes shape[-1] as the physical K/V length, which must cover
    every page named in block_tables."""

    block_tables: torch.Tensor
    page_size: int
    _EXTRA_FIELDS: Tuple[str, ...] = ()

    def _validate_paged(self) -> None:
        self._validate_pairs()
        bt = self.block_tables
        if not isinstance(bt, torch.Tensor) or bt.ndim != 2:
            raise ValueError(f"block_tables must be a 2-D tensor [B, max_pages], got "
                             f"{getattr(bt, 'shape', type(bt).__name__)}")
        if bt.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"block_tables must be int32 or int64, got {bt.dtype}")
        nb = len(self.k_seqinfo.seqlen_py)
        if bt.shape[0] != nb:
            raise ValueError(f"block_tables has {bt.shape[0]} rows but there are {nb} sequences")
        self.page_size = _positive_int("page_size", self.page_size)
        row = bt.shape[1] * self.page_size
        for b, (s, e) in enumerate(self._logical_offsets()):
            if e - s > row or s < 0 or e > row:
                raise ValueError(f"sequence {b} spans logical keys [{s}, {e}) but block_tables maps only "
                                 f"{row} keys per sequence")

    def _logical_offsets(self) -> List[Tuple[int, int]]:
        raise NotImplementedError

    def _unpaged_kwargs(self) -> dict:
        return self._block_kwargs()

    def _kv_total(self) -> int:
        return (int(self.block_tables.max().item()) + 1) * self.page_size if self.block_tables.numel() else 0

    def _allowed_2d_physical(self, mkv: int, device=None) -> torch.Tensor:
        bt = self.block_tables.cpu()
        ps = self.page_size
        allowed = torch.zeros(self.q_seqinfo.total, mkv, dtype=torch.bool, device=device)
        kw = self._block_kwargs()
        for b, ((qs, qe), (ls, le)) in enumerate(zip(self.q_seqinfo.intervals(), self._logical_offsets())):
            lane = torch.zeros(qe - qs, bt.shape[1] * ps, dtype=torch.bool, device=device)
            lane[:, ls:le] = _block_allowed(qe - qs, le - ls, device=device, **kw)
            for page in range(bt.shape[1]):
                phys = int(bt[b, page])
                if not lane[:, page * ps:(page + 1) * ps].any():
                    continue
                allowed[qs:qe, phys * ps:(phys + 1) * ps] |= lane[:, page * ps:(page + 1) * ps]
        return allowed

    def materialize(self, shape, dtype=torch.float32, device="cpu"):
        mq, mkv = _check_shape(shape)
        if mq != self.q_seqinfo.total:
            raise ValueError(f"{type(self).__name__}.materialize: shape {tuple(shape)} must have "
                             f"Mq = {self.q_seqinfo.total}")
        if mkv < self._kv_total():
            raise ValueError(f"{type(self).__name__}.materialize: physical K/V length {mkv} is smaller than "
                             f"the {self._kv_total()} keys block_tables addresses")
        return _to_bias(self._allowed_2d_physical(mkv, device), shape, dtype, device)

    def to(self, device):
        return type(self)(**{**self.__dict__, "q_seqinfo": self.q_seqinfo.to(device),
                             "k_seqinfo": self.k_seqinfo.to(device), "block_tables": self.block_tables.to(device)})


@dataclass(eq=False)
class PagedBlockDiagonalPaddedKeysMask(_PagedBase):
    """Padded lanes (padding = block_tables.shape[1] * page_size) through a page table."""

    q_seqinfo: _SeqLenInfo
    k_seqinfo: _PaddedSeqLenInfo
    block_tables: torch.Tensor
    page_size: int

    def __post_init__(self) -> None:
        self._validate_paged()

    def _logical_offsets(self):
        return [(0, x) for x in self.k_seqinfo.seqlen_py]

    @classmethod
    def from_seqlens(cls, q_seqlen, kv_seqlen, block_tables: torch.Tensor, page_size: int, *, device=None, **kw):
        q = _SeqLenInfo.from_seqlens(q_seqlen, device=device)
        if not isinstance(block_tables, torch.Tensor) or block_tables.ndim != 2:
            raise ValueError("block_tables must be a 2-D tensor [B, max_pages]")
        k = _PaddedSeqLenInfo.from_seqlens_padded(kv_seqlen, block_tables.shape[1] * page_size, device=device)
        return cls(q_seqinfo=q, k_seqinfo=k, block_tables=block_tables, page_size=page_size, **kw)


@dataclass(eq=False)
class PagedBlockDiagonalCausalWithOffsetPaddedKeysMask(PagedBlockDiagonalPaddedKeysMask):
    """Bottom-right causal paged padded mask."""

    def _block_kwargs(self):
        return dict(causal=True, bottom_right=True)


@dataclass(eq=False)
class PagedBlockDiagonalCausalLocalPaddedKeysMask(_CausalWindow, PagedBlockDiagonalPaddedKeysMask):
    """Bottom-right causal local window of `_window_size` keys, paged."""

    _window_size: int = 0
    _EXTRA_FIELDS = ("_window_size",)

    def __post_init__(self) -> None:  # the window is checked before the page table
        self._window_size = _check_window("_window_size", self._window_size)
        self._validate_paged()

    @classmethod
    def from_seqlens_local(cls, q_seqlen, kv_seqlen, block_tables, page_size, window_size, *, device=None):
        return cls.from_seqlens(q_seqlen, kv_seqlen, block_tables, page_size, device=device,
                                _window_size=window_size)


@dataclass(eq=False)
class PagedBlockDiagonalGappyKeysMask(_PagedBase):
    """Gappy lanes through a page table; kv_seqstarts are offsets inside each notional lane."""

    q_seqinfo: _SeqLenInfo
    k_seqinfo: _GappySeqInfo
    block_tables: torch.Tensor
    page_size: int

    def __post_init__(self) -> None:
        self._validate_paged()

    def _logical_offsets(self):
        return [(s, s + x) for s, x in zip(self.k_seqinfo.seqstart_py, self.k_seqinfo.seqlen_py)]

    @classmethod
    def from_seqlens(cls, q_seqlen, kv_seqstarts, kv_seqlen, block_tables, page_size, *, device=None):
        q = _SeqLenInfo.from_seqlens(q_seqlen, device=device)
        k = _GappySeqInfo.from_seqlens_gappy(kv_seqstarts, kv_seqlen, True, device=device)
        return cls(q_seqinfo=q, k_seqinfo=k, block_tables=block_tables, page_size=page_size)


@dataclass(eq=False)
class PagedBlockDiagonalCausalWithOffsetGappyKeysMask(PagedBlockDiagonalGappyKeysMask):
    """Bottom-right causal paged-gappy mask."""

    def _block_kwargs(self):
        return dict(causal=True, bottom_right=True)


VARLEN_BIASES: Tuple[Type[AttentionBias], ...] = (
    BlockDiagonalMask,
    BlockDiagonalPaddedKeysMask,
    BlockDiagonalGappyKeysMask,
    PagedBlockDiagonalPaddedKeysMask,
    PagedBlockDiagonalGappyKeysMask,
)
