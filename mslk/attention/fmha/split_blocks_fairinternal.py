"""iRoPE chunked attention as mask rewrites, and the paged form of padded / gappy masks.

Chunked (iRoPE local-layer) attention with chunk length L = `batchify_len`: a query at position p of
its sequence attends only to keys of the same chunk, positions [floor(p / L) * L, p]. The input is
the usual decode / prefill mask over padded K/V lanes (lane b at b * padding, seqlen[b] valid keys;
sequence b's queries are its last q_len[b] positions): BlockDiagonalCausalWithOffsetPaddedKeysMask,
or BlockDiagonalPaddedKeysMask (non-causal: a query sees every valid key of its chunk). The rewrites
only describe other lanes over the same Q and K/V tensors; no data moves.

- split_blocks_for_prefill: each padded lane of `padding` keys becomes padding / L lanes of L keys
  (chunk c of sequence b is lane b * padding / L + c), each with the queries that fall in that chunk.
- split_blocks_for_decoding: when every sequence's queries lie in one chunk (always at q_len 1), a
  gappy mask whose lane b starts at that chunk's start; paged (PagedBlockDiagonalGappyKeysMask) when
  the input is paged or block_tables is given. The device half (split_blocks_for_decoding_gpu_part)
  computes the lane starts and lengths with tensor ops only (no host sync).
- maybe_make_paged: padded / gappy masks to their paged counterparts through a block table.
"""

from __future__ import annotations

from typing import List, Optional, Tuple, Union

import torch

from mslk.attention.fmha import attn_bias as _ab

__all__ = ["split_blocks_for_decoding", "split_blocks_for_decoding_gpu_part", "split_blocks_for_prefill",
           "maybe_make_paged"]

_PADDED = (_ab.BlockDiagonalCausalWithOffsetPaddedKeysMask, _ab.BlockDiagonalPaddedKeysMask)
_PAGED_PADDED = (_ab.PagedBlockDiagonalCausalWithOffsetPaddedKeysMask, _ab.PagedBlockDiagonalPaddedKeysMask)


def _check_len(batchify_len) -> None:
    if not isinstance(batchify_len, int) or isinstance(batchify_len, bool) or batchify_len <= 0:
        raise ValueError(f"batchify_len must be a positive int or None, got {batchify_len!r}")


def _lanes(input_bias, api: str):
    """(causal, padding, q_lens, kv_lens, block_tables, page_size) of a padded or paged-padded mask."""
    if type(input_bias) in _PADDED:
        return (isinstance(input_bias, _ab.BlockDiagonalCausalWithOffsetPaddedKeysMask), input_bias.k_seqinfo.padding,
                input_bias.q_seqinfo.seqlen_py, input_bias.k_seqinfo.seqlen_py, None, None)
    if type(input_bias) in _PAGED_PADDED:
        bt = input_bias.block_tables
        return (isinstance(input_bias, _ab.PagedBlockDiagonalCausalWithOffsetPaddedKeysMask),
                bt.shape[1] * input_bias.page_size, input_bias.q_seqinfo.seqlen_py, input_bias.k_seqinfo.seqlen_py,
                bt, input_bias.page_size)
    raise TypeError(f"{api}: input_bias must be one of {', '.join(t.__name__ for t in _PADDED + _PAGED_PADDED)}; "
                    f"got {type(input_bias).__name__}")


def _chunk_start(q_len: int, kv_len: int, L: int) -> int:
    """Start of the chunk holding the first query of a sequence (its last key when it has none)."""
    return (max(kv_len - max(q_len, 1), 0) // L) * L


# ---- prefill ----------------------------------------------------------------------------------------

def split_blocks_for_prefill(input_bias, batchify_len) -> Optional[_ab.BlockDiagonalPaddedKeysMask]:
    """The chunked-attention form of a padded prefill mask: lanes of `batchify_len` keys, one per chunk
    of each sequence (padding must be a multiple of batchify_len, or at most it: then each lane is one
    chunk and the mask comes back as it was), of the input's kind (bottom-right
    causal or not). A paged input comes back paged (the block-table rows cut per chunk; batchify_len
    must then be a multiple of page_size). None when batchify_len is None (no chunking)."""
    api = "split_blocks_for_prefill"
    if batchify_len is None:
        return None
    _check_len(batchify_len)
    causal, padding, q_lens, kv_lens, bt, page_size = _lanes(input_bias, api)
    L = min(batchify_len, padding)  # a chunk longer than the lane: the lane is one chunk
    if padding % L:
        raise ValueError(f"{api}: the K/V padding {padding} must be a multiple of batchify_len {L}")
    new_q: List[int] = []
    new_kv: List[int] = []
    for b, (lq, lk) in enumerate(zip(q_lens, kv_lens)):
        if lq > lk:
            raise ValueError(f"{api}: sequence {b} has {lq} queries but only {lk} keys")
        first = lk - lq  # position of the first query
        for c in range(padding // L):
            lo, hi = c * L, (c + 1) * L
            new_kv.append(max(0, min(lk, hi) - lo))
            new_q.append(max(0, min(lk, hi) - max(lo, first)))
    cls = _ab.BlockDiagonalCausalWithOffsetPaddedKeysMask if causal else _ab.BlockDiagonalPaddedKeysMask
    out = cls.from_seqlens(new_q, L, new_kv, device=input_bias.q_seqinfo.seqstart.device)
    if bt is None:
        return out
    return maybe_make_paged(out, bt, page_size, padding)


# ---- decoding ---------------------------------------------------------------------------------------

def split_blocks_for_decoding_gpu_part(input_bias, batchify_len, block_tables=None,
                                       page_size=None) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
    """The device half of split_blocks_for_decoding: (kv_seqstarts [B + 1], kv_seqlen [B]) int32 on the
    mask's device, computed from its seqlen / seqstart tensors with tensor ops only (so it can be
    captured in a CUDA graph and follow in-place updates of those tensors). Lane b starts at the chunk
    of its first query: b * padding + start unpaged (last entry B * padding), the offset start inside
    the notional lane when paged (last entry: the notional lane length). None when batchify_len is None."""
    api = "split_blocks_for_decoding_gpu_part"
    if batchify_len is None:
        return None
    _check_len(batchify_len)
    _, padding, _, _, bt, ps = _lanes(input_bias, api)
    paged = bt is not None or block_tables is not None
    if block_tables is not None and bt is None:
        if not isinstance(page_size, int) or page_size <= 0:
            raise ValueError(f"{api}: block_tables needs a positive int page_size, got {page_size!r}")
        row = block_tables.shape[1] * page_size
    else:
        row = padding
    kv_len = input_bias.k_seqinfo.seqlen.to(torch.int64)
    qs = input_bias.q_seqinfo.seqstart.to(device=kv_len.device, dtype=torch.int64)
    q_len = (qs[1:] - qs[:-1]).clamp(min=1)
    start = (kv_len - q_len).clamp(min=0).div(batchify_len, rounding_mode="floor") * batchify_len
    lens = (kv_len - start).to(torch.int32)
    nb = kv_len.shape[0]
    if paged:
        starts = torch.cat([start, start.new_full((1,), row)])
    else:
        base = torch.arange(nb + 1, device=kv_len.device, dtype=torch.int64) * padding
        starts = base + torch.cat([start, start.new_zeros(1)])
    return starts.to(torch.int32), lens


def split_blocks_for_decoding(input_bias, batchify_len, block_tables=None, page_size=None, gpu_data=None
                              ) -> Optional[Union[_ab.BlockDiagonalGappyKeysMask, _ab.PagedBlockDiagonalGappyKeysMask]]:
    """The chunked-attention form of a padded decode mask as a gappy mask: lane b holds the keys of the
    chunk of its queries, [start_b, seqlen_b). Paged (PagedBlockDiagonalGappyKeysMask) when input_bias is
    paged or block_tables (with page_size) is given, the lanes then mapped through that table.
    BlockDiagonalGappyKeysMask / its paged form at one query per sequence (or a non-causal input), the
    CausalWithOffset variants otherwise. gpu_data: split_blocks_for_decoding_gpu_part's result, used as
    the mask's k_seqinfo seqstart / seqlen tensors (the host lists come from input_bias; for paged masks
    the kernels' descriptor rebuilds the lane starts from those lists). None when batchify_len is None, or
    when some sequence's queries straddle a chunk boundary (a gappy lane cannot express that: use
    split_blocks_for_prefill)."""
    api = "split_blocks_for_decoding"
    if batchify_len is None:
        return None
    _check_len(batchify_len)
    causal, padding, q_lens, kv_lens, bt, ps = _lanes(input_bias, api)
    if bt is not None and block_tables is not None:
        raise ValueError(f"{api}: input_bias is already paged; pass block_tables=None")
    if block_tables is not None:
        if not isinstance(block_tables, torch.Tensor) or block_tables.ndim != 2:
            raise ValueError(f"{api}: block_tables must be a 2-D tensor [B, max_pages]")
        if not isinstance(page_size, int) or page_size <= 0:
            raise ValueError(f"{api}: block_tables needs a positive int page_size, got {page_size!r}")
        bt, ps = block_tables, page_size
    L = batchify_len
    starts: List[int] = []
    for b, (lq, lk) in enumerate(zip(q_lens, kv_lens)):
        if lq > lk:
            raise ValueError(f"{api}: sequence {b} has {lq} queries but only {lk} keys")
        s = _chunk_start(lq, lk, L)
        if lq > 1 and lk - 1 >= s + L:
            return None
        starts.append(s)
    lens = [lk - s for lk, s in zip(kv_lens, starts)]
    many = causal and max(q_lens) > 1
    dev = input_bias.q_seqinfo.seqstart.device
    if bt is None:
        cls = _ab.BlockDiagonalCausalWithOffsetGappyKeysMask if many else _ab.BlockDiagonalGappyKeysMask
        nb = len(kv_lens)
        out = cls.from_seqlens(q_lens, [b * padding + s for b, s in enumerate(starts)] + [nb * padding], lens,
                               device=dev)
    else:
        cls = _ab.PagedBlockDiagonalCausalWithOffsetGappyKeysMask if many else _ab.PagedBlockDiagonalGappyKeysMask
        out = cls.from_seqlens(q_lens, starts + [bt.shape[1] * ps], lens, bt, ps, device=dev)
    if gpu_data is not None:
        _adopt(out.k_seqinfo, gpu_data, api)
    return out


def _adopt(k_seqinfo, gpu_data, api: str) -> None:
    """Makes gpu_data = (kv_seqstarts, kv_seqlen) the mask's device tensors (what the kernels read).
    Only their shapes are checked: reading the values back would be the host sync they avoid."""
    if not (isinstance(gpu_data, (tuple, list)) and len(gpu_data) == 2
            and all(isinstance(t, torch.Tensor) for t in gpu_data)):
        raise TypeError(f"{api}: gpu_data must be the (kv_seqstarts, kv_seqlen) pair of "
                        "split_blocks_for_decoding_gpu_part")
    starts, lens = gpu_data
    if tuple(starts.shape) != tuple(k_seqinfo.seqstart.shape) or tuple(lens.shape) != tuple(k_seqinfo.seqlen.shape):
        raise ValueError(f"{api}: gpu_data shapes {tuple(starts.shape)}, {tuple(lens.shape)} do not match the "
                         f"mask's {tuple(k_seqinfo.seqstart.shape)}, {tuple(k_seqinfo.seqlen.shape)}")
    k_seqinfo.seqstart = starts.to(torch.int32)
    k_seqinfo.seqlen = lens.to(torch.int32)


# ---- paging -----------------------------------------------------------------------------------------

_PAGED_OF = {
    _ab.BlockDiagonalPaddedKeysMask: _ab.PagedBlockDiagonalPaddedKeysMask,
    _ab.BlockDiagonalCausalWithOffsetPaddedKeysMask: _ab.PagedBlockDiagonalCausalWithOffsetPaddedKeysMask,
    _ab.BlockDiagonalCausalLocalAttentionPaddedKeysMask: _ab.PagedBlockDiagonalCausalLocalPaddedKeysMask,
    _ab.BlockDiagonalGappyKeysMask: _ab.PagedBlockDiagonalGappyKeysMask,
    _ab.BlockDiagonalCausalWithOffsetGappyKeysMask: _ab.PagedBlockDiagonalCausalWithOffsetGappyKeysMask,
}


def maybe_make_paged(attn_bias, block_tables, page_size, notional_padding) -> Optional[_ab.AttentionBias]:
    """attn_bias through the page table block_tables [B, max_pages] (pages of page_size keys), where the
    unpaged layout gives each of the B sequences `notional_padding` keys. attn_bias unchanged when
    block_tables is None (or attn_bias is None or already paged).

    - padded masks with B lanes: lane b is sequence b's notional lane;
    - padded masks with B * (notional_padding / padding) lanes (split_blocks_for_prefill's output):
      lane b * n + c is chunk c of sequence b, its pages the c-th run of padding / page_size entries of
      block_tables[b] (padding must be a multiple of page_size);
    - gappy masks: lane b starts at b * notional_padding + offset; the paged mask keeps the offsets.
    """
    api = "maybe_make_paged"
    if block_tables is None or attn_bias is None or isinstance(attn_bias, _ab._PagedBase):
        return attn_bias
    paged_type = _PAGED_OF.get(type(attn_bias))
    if paged_type is None:
        raise TypeError(f"{api}: no paged form of {type(attn_bias).__name__} (supported: "
                        f"{', '.join(t.__name__ for t in _PAGED_OF)})")
    if not isinstance(block_tables, torch.Tensor) or block_tables.ndim != 2:
        raise ValueError(f"{api}: block_tables must be a 2-D tensor [B, max_pages]")
    if not isinstance(page_size, int) or page_size <= 0:
        raise ValueError(f"{api}: page_size must be a positive int, got {page_size!r}")
    if isinstance(attn_bias, _ab.BlockDiagonalGappyKeysMask):
        return attn_bias.make_paged(block_tables, page_size, notional_padding, paged_type)
    nb, lanes, padding = block_tables.shape[0], len(attn_bias.k_seqinfo.seqlen_py), attn_bias.k_seqinfo.padding
    if lanes != nb:
        per = notional_padding // padding if padding and notional_padding % padding == 0 else 0
        if per == 0 or lanes != nb * per or padding % page_size:
            raise ValueError(f"{api}: {lanes} K/V lanes of {padding} keys match neither the {nb} rows of block_tables "
                             f"nor {nb} sequences of notional_padding {notional_padding} cut into lanes of whole "
                             f"pages of {page_size}")
        pages = padding // page_size
        if per * pages > block_tables.shape[1]:
            raise ValueError(f"{api}: block_tables has {block_tables.shape[1]} pages per sequence, fewer than the "
                             f"{per * pages} of notional_padding {notional_padding}")
        block_tables = block_tables[:, :per * pages].reshape(lanes, pages)
    return attn_bias.make_paged(block_tables, page_size, paged_type)
