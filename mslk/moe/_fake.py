"""Fake (Meta) implementations of the MoE ops, for torch.compile and export (shapes only)."""

import torch

_FP8 = torch.float8_e4m3fn


@torch.library.register_fake("mslk::index_shuffling")
def _index_shuffling(routing_scores, expert_index_start=None, expert_index_end=None, valid_token_count=None,
                     top_k=1):
    T, E = routing_scores.shape
    new = lambda n: routing_scores.new_empty((n,), dtype=torch.int32)  # noqa: E731
    return new(E + 2), new(T * top_k), new(T * top_k)


@torch.library.register_fake("mslk::gather_scale_dense_tokens")
def _gather(x, token_indices, expert_indices, scores, valid_token_count=None):
    return x.new_empty((token_indices.shape[0], x.shape[1]))


@torch.library.register_fake("mslk::gather_scale_quant_dense_tokens")
def _gather_quant(x, token_indices, expert_indices, scores, scale_ub=None, valid_token_count=None):
    a = token_indices.shape[0]
    return x.new_empty((a, x.shape[1]), dtype=_FP8), x.new_empty((a,), dtype=torch.float32)


@torch.library.register_fake("mslk::scatter_add_dense_tokens")
def _scatter_add(out_tokens, in_tokens, token_indices, valid_token_count=None):
    return None


@torch.library.register_fake("mslk::scatter_add_padded_tokens")
def _scatter_padded(in_tokens, token_counts, token_indices, out_tokens):
    return None


@torch.library.register_fake("mslk::combine_shuffling")
def _combine(tokens, token_counts, expert_start=None, expert_end=None, is_padded=False):
    E = token_counts.shape[1]
    eg = (E if expert_end is None else expert_end) - (0 if expert_start is None else expert_start)
    return torch.empty_like(tokens), token_counts.new_empty((eg + 1,))


@torch.library.register_fake("mslk::split_shuffling")
def _split(tokens, token_counts, expert_start=None, expert_end=None, is_padded=False, init_with_zeros=False):
    return torch.empty_like(tokens)


@torch.library.register_fake("mslk::silu_mul")
def _silu_mul(x0, x1, valid_token_count=None):
    return x0.new_empty(x0.shape)


@torch.library.register_fake("mslk::silu_mul_quant")
def _silu_mul_quant(x0, x1, scale_ub=None, valid_token_count=None):
    return x0.new_empty(x0.shape, dtype=_FP8), x0.new_empty((x0.shape[0],), dtype=torch.float32)


@torch.library.register_fake("mslk::scatter_add_along_first_dim")
def _scatter_first_dim(Dst, Src, Index):
    return None
