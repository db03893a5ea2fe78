"""Tree (speculative) attention: Medusa / EAGLE / Hydra-style verification of a token tree.

A decode step scores T speculative tokens arranged as a tree (node 0 is the root: the last accepted
token; every other node is a draft token whose parent is one level up). Each tree token attends to
the whole KV-cache prefix of its sequence and, inside the tree, to its ancestors and itself. That is
two partial attentions merged by LSE (`merge_attentions`):

- prefix: the B x T queries packed as one sequence batch ([1, B*T, ...]) over the cache, under the
  caller's decode mask (padded, gappy or paged K/V, normally non-causal so that every tree token
  sees the whole prefix), through `memory_efficient_attention_partial` with `prefix_op`;
- suffix: q [B, T, ...] over the speculative K/V [B, T, ...] under the T x T tree mask (an additive
  tensor bias), with `suffix_op` (None: dispatch; on CUDA only the split-K decode operator and the
  reference take partial attention, and only the reference takes a tensor bias, so the small
  T x T suffix runs unfused).

Trees are described Medusa-style by `tree_choices`: one tuple per non-root node, the path of child
ranks from the root ((0,) is the root's first child, (0, 1) that child's second child), every
prefix of a path present. Nodes are numbered 1.. in (depth, path) order; node 0 is the root.

Quantized K/V caches (layouts: mslk.attention.fmha.quantized_kv) are int32 tensors: INT4 rows with
their scale/shift inline, or FP8 E4M3 rows whose per-row scale/shift come as `quantized_kv_scales`
= (k_scale_shift, v_scale_shift). The prefix then reads them in the split-K decode operator; where
that operator has no kernel (CPU), the cache is dequantized first. `q_fp8` (an FP8 copy of the
queries for a kernel that multiplies FP8 queries) is accepted and not read: the decode kernel
multiplies q itself, in bf16 / fp16, so the result is that of q (no query quantization error).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple, Type, Union

import torch

from mslk.attention.fmha import attn_bias as _ab
from mslk.attention.fmha import (_decode, _run_forward, memory_efficient_attention_partial, merge_attentions, quantized_kv,
                                 triton_splitk)
from mslk.attention.fmha.common import AttentionFwOpBase, Inputs, InputsFp8

__all__ = [
    "TreeAttnMetadata", "tree_attention", "use_triton_splitk_for_prefix", "select_prefix_op", "SplitKAutotune",
    "construct_full_tree_choices", "construct_tree_choices", "get_full_tree_size",
]


# ---- tree builders ----------------------------------------------------------------------------------

def construct_full_tree_choices(tree_depth: int, branching: int) -> List[Tuple[int, ...]]:
    """The non-root nodes of a full tree: `tree_depth` levels below the root (the root is not counted),
    `branching` children per inner node, in (depth, path) order. The tree has
    get_full_tree_size(tree_depth + 1, branching) nodes with its root."""
    _check_count("tree_depth", tree_depth, allow_zero=True)
    _check_count("branching", branching)
    return construct_tree_choices([branching] * tree_depth)


def construct_tree_choices(branching: List[int]) -> List[Tuple[int, ...]]:
    """The non-root nodes of a tree whose level-i nodes (the root is level 0) all have branching[i]
    children, in (depth, path) order."""
    for i, b in enumerate(branching):
        _check_count(f"branching[{i}]", b)
    out: List[Tuple[int, ...]] = []
    for depth in range(1, len(branching) + 1):
        out.extend(itertools.product(*(range(b) for b in branching[:depth])))
    return out


def get_full_tree_size(tree_depth: int, branching: int) -> int:
    """sum(branching ** i for i in range(tree_depth)): the node count of a full tree of `tree_depth`
    levels counting the root level (so construct_full_tree_choices(d, b) has
    get_full_tree_size(d + 1, b) - 1 nodes: the two count depth differently, as the spec defines)."""
    _check_count("tree_depth", tree_depth, allow_zero=True)
    _check_count("branching", branching)
    return sum(branching ** i for i in range(tree_depth))


def _check_count(name: str, value, allow_zero: bool = False) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'non-negative' if allow_zero else 'positive'}, got {value}")


# ---- tree metadata ----------------------------------------------------------------------------------

@dataclass(eq=False)
class TreeAttnMetadata:
    """Mask and traversal tables of a speculative token tree of T = len(tree_choices) + 1 nodes.

    attention_bias      [T, T] additive mask (dtype, device): 0 where key node j is node i or one of
                        its ancestors, -inf elsewhere (the suffix bias of tree_attention).
    tree_indices        [T] int64: node -> index into the flattened draft tokens
                        [root, level-1 candidates, level-2 candidates, ...], where level d has
                        1 + (largest child rank at level d) candidates; node (.., c) at level d maps
                        to 1 + (candidates of levels < d) + c.
    retrieval_indices   [num_leaves, max_depth + 1] int64: the node ids of each root-to-leaf path,
                        padded with -1; leaves in node order.
    path_lengths        nodes on each leaf's path (root included).
    position_ids        [T] int64: node depth (root 0), the position offset of each tree token.
    parent_node_indices [T] int64: parent node id (-1 for the root).
    child_node_indices  [T, max_children] int64: child node ids in rank order, padded with -1.
    candidate_idx       [T] int64: the node's rank among its siblings (the last path entry; root 0).
    num_nodes_per_level nodes at each depth (level 0: the root).
    num_children_per_node, subtree_sizes: per node (a subtree counts its root).
    """

    tree_choices: List[Tuple[int, ...]]
    attention_bias: torch.Tensor
    tree_indices: torch.Tensor
    retrieval_indices: torch.Tensor
    path_lengths: List[int]
    position_ids: torch.Tensor
    parent_node_indices: torch.Tensor
    child_node_indices: torch.Tensor
    candidate_idx: torch.Tensor
    num_nodes_per_level: List[int]
    num_children_per_node: List[int]
    subtree_sizes: List[int]

    @property
    def tree_size(self) -> int:
        return len(self.tree_choices) + 1

    @classmethod
    def from_tree_choices(cls, tree_choices: Sequence[Sequence[int]], dtype: Optional[torch.dtype] = None,
                          device: Optional[Union[str, torch.device]] = None) -> "TreeAttnMetadata":
        """Builds the metadata; the paths are sorted by (depth, path) first, which is the node order."""
        choices = _sorted_choices(tree_choices)
        T = len(choices) + 1
        index = {(): 0, **{c: i + 1 for i, c in enumerate(choices)}}
        parent = [-1] + [index[c[:-1]] for c in choices]
        depth = [0] + [len(c) for c in choices]
        children: List[List[int]] = [[] for _ in range(T)]
        for node in range(1, T):
            children[parent[node]].append(node)  # node order is rank order among siblings
        ancestors = [[0]]
        for node in range(1, T):
            ancestors.append(ancestors[parent[node]] + [node])
        max_depth = max(depth)
        levels = [depth.count(d) for d in range(max_depth + 1)]
        cands = [1] + [1 + max((c[-1] for c in choices if len(c) == d), default=-1) for d in range(1, max_depth + 1)]
        level_base = [sum(cands[:d]) for d in range(max_depth + 1)]
        tree_idx = [0] + [level_base[len(c)] + c[-1] for c in choices]
        subtree = [1] * T
        for node in range(T - 1, 0, -1):  # children follow parents in node order
            subtree[parent[node]] += subtree[node]
        leaves = [n for n in range(T) if not children[n]]

        allowed = torch.zeros(T, T, dtype=torch.bool)
        for node, anc in enumerate(ancestors):
            allowed[node, anc] = True
        bias = torch.zeros(T, T, dtype=dtype or torch.float32)
        bias.masked_fill_(~allowed, -math.inf)

        def pad(rows: List[List[int]], width: int) -> torch.Tensor:
            flat = [r + [-1] * (width - len(r)) for r in rows]
            return torch.tensor(flat, dtype=torch.int64).reshape(len(rows), width)

        lng = functools.partial(torch.tensor, dtype=torch.int64)
        meta = cls(
            tree_choices=choices, attention_bias=bias, tree_indices=lng(tree_idx),
            retrieval_indices=pad([ancestors[n] for n in leaves], max_depth + 1),
            path_lengths=[len(ancestors[n]) for n in leaves], position_ids=lng(depth),
            parent_node_indices=lng(parent), child_node_indices=pad(children, max(len(c) for c in children)),
            candidate_idx=lng([0] + [c[-1] for c in choices]), num_nodes_per_level=levels,
            num_children_per_node=[len(c) for c in children], subtree_sizes=subtree)
        return meta.to(device) if device is not None else meta

    @classmethod
    def from_tree_choices_cached(cls, tree_choices: Tuple[Tuple[int, ...], ...], dtype: Optional[torch.dtype] = None,
                                 device: Optional[Union[str, torch.device]] = None) -> "TreeAttnMetadata":
        """from_tree_choices behind an LRU cache keyed by the (hashable) arguments: repeated decode steps
        with one tree share the tensors, which callers must therefore not modify."""
        return _cached_metadata(cls, tuple(tuple(c) for c in tree_choices), dtype,
                                None if device is None else torch.device(device))

    def to(self, device) -> "TreeAttnMetadata":
        moved = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in self.__dict__.items()}
        return type(self)(**moved)


@functools.lru_cache(maxsize=64)
def _cached_metadata(cls, tree_choices, dtype, device) -> TreeAttnMetadata:
    return cls.from_tree_choices(tree_choices, dtype=dtype, device=device)


def _sorted_choices(tree_choices) -> List[Tuple[int, ...]]:
    choices = []
    for c in tree_choices:
        path = tuple(c)
        if len(path) == 0:
            raise ValueError("tree_choices: the root is implicit; every path must have at least one entry")
        for x in path:
            if not isinstance(x, int) or isinstance(x, bool) or x < 0:
                raise ValueError(f"tree_choices: path {path} must hold non-negative ints")
        choices.append(path)
    if len(set(choices)) != len(choices):
        raise ValueError("tree_choices: duplicate paths")
    present = set(choices)
    for path in choices:
        if len(path) > 1 and path[:-1] not in present:
            raise ValueError(f"tree_choices: node {path} has no parent {path[:-1]}")
    return sorted(choices, key=lambda p: (len(p), p))


# ---- operator choice --------------------------------------------------------------------------------

class SplitKAutotune(triton_splitk.FwOp):
    """The split-K decode operator for the tree prefix with `autotune=True`. Its split count is
    triton_splitk.FwOp's own per-shape choice (the kernel's heuristic, num_splits=0, from the sequence
    count, K/V heads, keys and SM count: torch.ops.mslk.fmha_decode_num_splits); there is no separate
    runtime search, since the kernel's tile table is already chosen per head dim."""

    NAME = "triton_splitK_autotune"


# Below this many (sequence, K/V head) pairs the non-split forward kernels leave most of an H200's
# SMs idle on a long prefix, while split-K spreads the keys over CTAs. Not measured yet.
_SPLITK_MAX_SEQ_HEADS = 32
# Up to this many queries per sequence the split-K kernel reads each K/V head at most as often as
# the per-query-head forward kernels do (ceil(H * T / 16) <= H row tiles).
_SPLITK_MAX_TREE = 16


def use_triton_splitk_for_prefix(B: int, G: int, tree_size: int) -> bool:
    """Whether the tree prefix (B sequences, G K/V heads, tree_size queries each) goes to the split-K
    decode operator: for small trees (at most 16 nodes) or few (sequence, K/V head) pairs."""
    return tree_size <= _SPLITK_MAX_TREE or B * G <= _SPLITK_MAX_SEQ_HEADS


def select_prefix_op(B, G, tree_size, autotune, attn_bias, kv_cache_dtype) -> Optional[Type[AttentionFwOpBase]]:
    """The forward operator for the tree prefix, or None to let dispatch choose. Quantized (int32 /
    FP8) caches always take split-K (the only operator meant for them); float caches take it when
    use_triton_splitk_for_prefix says so and it supports attn_bias's type; SplitKAutotune when
    `autotune`."""
    op = SplitKAutotune if autotune else triton_splitk.FwOp
    if kv_cache_dtype in (torch.int32, torch.float8_e4m3fn, torch.float8_e5m2):
        return op
    if attn_bias is not None and not isinstance(attn_bias, op.SUPPORTED_ATTN_BIAS_TYPES):
        return None
    return op if use_triton_splitk_for_prefix(B, G, tree_size) else None


# ---- tree attention ---------------------------------------------------------------------------------

def tree_attention(q: torch.Tensor, spec_k: torch.Tensor, spec_v: torch.Tensor, cache_k: torch.Tensor,
                   cache_v: torch.Tensor, spec_attn_bias: Union[torch.Tensor, TreeAttnMetadata],
                   prefix_attn_bias: Optional[_ab.AttentionBias], prefix_op: Optional[Type[AttentionFwOpBase]] = None,
                   suffix_op: Optional[Type[AttentionFwOpBase]] = None, autotune: bool = False,
                   quantized_kv_scales=None, q_fp8=None) -> torch.Tensor:
    """Attention of T speculative tokens per sequence over the KV-cache prefix and the token tree.

    q, spec_k, spec_v: [B, T, (G,) H, D] (BMHK or BMGHK; GQA: K/V expand()ed over H).
    cache_k, cache_v: [1, N, (G,) H, D] with prefix_attn_bias a variable-length decode mask of B query
        blocks of T queries (padded, gappy or paged K/V, e.g. BlockDiagonalPaddedKeysMask.from_seqlens(
        [T] * B, padding, lens)); or [B, L, (G,) H, D] with prefix_attn_bias None (every tree token sees
        all L keys of its sequence).
    spec_attn_bias: the T x T additive tree mask (TreeAttnMetadata.attention_bias, or the metadata),
        broadcastable to [B, (G,) H, T, T].
    prefix_op / suffix_op: forward operators of the two partial attentions (prefix default:
        select_prefix_op, falling back to dispatch where it does not apply; suffix default: dispatch).
    Returns the merged output in q's layout and dtype, head dim of V.
    """
    api = "tree_attention"
    if q_fp8 is not None:  # not read (module docstring); checked so that a misplaced argument still fails
        parts = q_fp8 if isinstance(q_fp8, (tuple, list)) else (q_fp8,)
        if not parts or not all(isinstance(x, torch.Tensor) for x in parts):
            raise TypeError(f"{api}: q_fp8 must be a tensor or a tuple of tensors (the FP8 queries and their "
                            f"scales), got {type(q_fp8).__name__}")
        if isinstance(q, torch.Tensor) and parts[0].shape[:2] != q.shape[:2]:
            raise ValueError(f"{api}: q_fp8 must hold q's tokens, shape {tuple(q.shape[:2])} + (...), got "
                             f"{tuple(parts[0].shape)}")
    for name, x in (("q", q), ("spec_k", spec_k), ("spec_v", spec_v), ("cache_k", cache_k), ("cache_v", cache_v)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{api}: {name} must be a tensor, got {type(x).__name__}")
        quantized_cache = name.startswith("cache") and x.dtype == torch.int32
        if not quantized_cache and (not x.dtype.is_floating_point or x.dtype in (torch.float8_e4m3fn, torch.float8_e5m2)):
            raise TypeError(f"{api}: {name} must be a floating-point tensor"
                            f"{' (or int32: a quantized K/V cache)' if name.startswith('cache') else ''}, got {x.dtype}")
    quantized = cache_k.dtype == torch.int32 or cache_v.dtype == torch.int32
    if quantized and cache_k.dtype != cache_v.dtype:
        raise TypeError(f"{api}: a quantized cache needs cache_k and cache_v both int32, got {cache_k.dtype} and "
                        f"{cache_v.dtype}")
    kv_scales = _kv_scales(quantized_kv_scales, quantized, cache_k, cache_v, api)
    if q.ndim not in (4, 5):
        raise ValueError(f"{api}: q must be [B, T, H, D] or [B, T, G, H, D], got {tuple(q.shape)}")
    B, T = q.shape[0], q.shape[1]
    heads = tuple(q.shape[2:-1])
    for name, x in (("spec_k", spec_k), ("spec_v", spec_v)):
        if x.ndim != q.ndim or tuple(x.shape[:-1]) != tuple(q.shape[:-1]):
            raise ValueError(f"{api}: {name} must be [B, T, (G,) H, *] like q {tuple(q.shape)}, got {tuple(x.shape)}")
    for name, x in (("cache_k", cache_k), ("cache_v", cache_v)):
        if x.ndim != q.ndim or tuple(x.shape[2:-1]) != heads:
            raise ValueError(f"{api}: {name} must have q's rank and heads {heads}, got {tuple(x.shape)}")

    bias = spec_attn_bias.attention_bias if isinstance(spec_attn_bias, TreeAttnMetadata) else spec_attn_bias
    if not isinstance(bias, torch.Tensor):
        raise TypeError(f"{api}: spec_attn_bias must be a tensor or a TreeAttnMetadata, got {type(bias).__name__}")
    if bias.ndim < 2 or tuple(bias.shape[-2:]) != (T, T):
        raise ValueError(f"{api}: spec_attn_bias must end with (T, T) = ({T}, {T}), got {tuple(bias.shape)}")
    bias = bias.to(device=q.device, dtype=torch.float64 if q.dtype == torch.float64 else torch.float32)

    # Prefix: the B * T queries as one packed batch over the cache.
    if prefix_attn_bias is None:
        q_pre = q
    else:
        qi = getattr(prefix_attn_bias, "q_seqinfo", None)
        if qi is None or qi.seqlen_py != [T] * B:
            raise ValueError(f"{api}: prefix_attn_bias must be a variable-length mask of {B} query blocks of "
                             f"{T} (got {type(prefix_attn_bias).__name__}"
                             f"{'' if qi is None else ' with query blocks ' + str(qi.seqlen_py)})")
        q_pre = q.reshape(1, B * T, *q.shape[2:])
    if prefix_op is None:
        kv_heads = math.prod(heads) // _decode.group_size(q, cache_k, cache_v)
        prefix_op = select_prefix_op(B, kv_heads, T, autotune, prefix_attn_bias, cache_k.dtype)
        if prefix_op is not None and (q.device.type not in prefix_op.SUPPORTED_DEVICES or not prefix_op.is_available()):
            prefix_op = None
    if not quantized:
        out_pre, lse_pre = memory_efficient_attention_partial(q_pre, cache_k, cache_v, prefix_attn_bias, op=prefix_op)
    elif prefix_op is None or not getattr(prefix_op, "SUPPORTS_QUANTIZED_KV", False):
        # No operator here reads the packed cache (CPU, or a float-only prefix_op): dequantize it.
        ck, cv = _dequantize_cache(cache_k, cache_v, kv_scales, q.shape[-1], q.dtype)
        out_pre, lse_pre = memory_efficient_attention_partial(q_pre, ck, cv, prefix_attn_bias, op=prefix_op)
    else:
        common = dict(query=q_pre, key=cache_k, value=cache_v, attn_bias=prefix_attn_bias, is_partial=True)
        inp = Inputs(**common) if kv_scales is None else InputsFp8(
            **common, k_fp8_scale_shift=kv_scales[0], v_fp8_scale_shift=kv_scales[1],
            use_fp32_scales=kv_scales[0].dtype == torch.float32)
        out_pre, ctx = _run_forward(inp, prefix_op, needs_gradient=True)
        lse_pre = ctx.lse
    out_pre = out_pre.reshape(B, T, *heads, out_pre.shape[-1])
    lse_pre = _batched_lse(lse_pre, B, T, heads)

    out_suf, lse_suf = memory_efficient_attention_partial(q, spec_k, spec_v, bias, op=suffix_op,
                                                          output_dtype=out_pre.dtype)
    out, _ = merge_attentions([out_pre, out_suf], [lse_pre, lse_suf.to(lse_pre.dtype)], write_lse=False,
                              output_dtype=q.dtype)
    return out


def _kv_scales(scales, quantized: bool, cache_k: torch.Tensor, cache_v: torch.Tensor, api: str
               ) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
    """quantized_kv_scales as (k_scale_shift, v_scale_shift): per cache row, int32 fp16 (scale, shift)
    pairs or float32 scales (mslk.attention.fmha.quantized_kv.quantize_kv_fp8); None: INT4 or float."""
    if scales is None:
        return None
    if not quantized:
        raise ValueError(f"{api}: quantized_kv_scales is given but the cache is {cache_k.dtype}, not an int32 "
                         "quantized cache")
    if not isinstance(scales, (tuple, list)) or len(scales) != 2 or not all(isinstance(x, torch.Tensor) for x in scales):
        raise TypeError(f"{api}: quantized_kv_scales must be a pair of tensors (k_scale_shift, v_scale_shift), got "
                        f"{type(scales).__name__}")
    for name, x, c in (("quantized_kv_scales[0]", scales[0], cache_k), ("quantized_kv_scales[1]", scales[1], cache_v)):
        if x.dtype not in (torch.int32, torch.float32):
            raise TypeError(f"{api}: {name} must be int32 (fp16 scale/shift pairs) or float32 (scales), got {x.dtype}")
        if tuple(x.shape) not in (tuple(c.shape[:-1]), tuple(c.shape[:-1]) + (1,)):
            raise ValueError(f"{api}: {name} must hold one entry per cache row, shape {tuple(c.shape[:-1])}, got "
                             f"{tuple(x.shape)}")
    if scales[0].dtype != scales[1].dtype:
        raise TypeError(f"{api}: quantized_kv_scales must share a dtype, got {scales[0].dtype} and {scales[1].dtype}")
    return scales[0], scales[1]


def _dequantize_cache(cache_k, cache_v, kv_scales, head_dim: int, dtype: torch.dtype):
    """The int32 cache as `dtype` K/V: FP8 rows with kv_scales, else INT4 rows (groups implied by the
    row length)."""
    if kv_scales is not None:
        return (quantized_kv.dequantize_kv_fp8(cache_k, kv_scales[0], dtype),
                quantized_kv.dequantize_kv_fp8(cache_v, kv_scales[1], dtype))
    return tuple(quantized_kv.dequantize_kv_int4(c, quantized_kv.int4_num_groups(head_dim, c.shape[-1]), dtype)
                 for c in (cache_k, cache_v))


def _batched_lse(lse: torch.Tensor, B: int, T: int, heads: Tuple[int, ...]) -> torch.Tensor:
    """The prefix LSE as [B, (G,) H, T]: from the packed varlen layout [1, (G,) H, B*T], the padded
    one [B, (G,) H, >= T] or the plain batched one."""
    if lse.shape[0] == 1 and lse.shape[-1] == B * T:
        return lse.reshape(*heads, B, T).movedim(-2, 0)
    if lse.shape[0] == B and lse.shape[-1] >= T:
        return lse[..., :T]
    raise ValueError(f"tree_attention: unexpected prefix LSE shape {tuple(lse.shape)} for B={B}, T={T}")
