"""Routed-token gather / scatter (`mslk.moe.gather_scatter`): thin wrappers over torch.ops.mslk.

Contracts (see the ops' C++ docs in csrc/moe):
- gather: out[i] = x[token_indices[i]] * scores[token_indices[i], expert_indices[i]] for
  i < valid_token_count (all rows when None); later rows are unspecified.
- scatter_add_dense_tokens: out_tokens[token_indices[i]] += in_tokens[i], rows added in
  ascending i and rounded after each addition (CPU and CUDA give the same bits).
- scatter_add_padded_tokens: in_tokens [EP, T, D], token_counts [E] (E % EP == 0), out_tokens
  [N, D] (T % N == 0, as the spec requires); slot s of
  expert e (global prefix order) adds in_tokens[e // (E // EP), s] into out_tokens[token_indices[s]].
"""

from typing import Optional

import torch

from mslk import _ops  # noqa: F401  (registers the ops)


def gather_scale_dense_tokens(x: torch.Tensor, token_indices: torch.Tensor, expert_indices: torch.Tensor,
                              scores: torch.Tensor, valid_token_count: Optional[torch.Tensor] = None) -> torch.Tensor:
    return torch.ops.mslk.gather_scale_dense_tokens(x, token_indices, expert_indices, scores, valid_token_count)


def gather_scale_quant_dense_tokens(x: torch.Tensor, token_indices: torch.Tensor, expert_indices: torch.Tensor,
                                    scores: torch.Tensor, scale_ub: Optional[torch.Tensor] = None,
                                    valid_token_count: Optional[torch.Tensor] = None
                                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (FP8 e4m3fn rows [A, D], float32 reciprocal scale per row [A])."""
    return torch.ops.mslk.gather_scale_quant_dense_tokens(x, token_indices, expert_indices, scores, scale_ub,
                                                          valid_token_count)


def scatter_add_dense_tokens(out_tokens: torch.Tensor, in_tokens: torch.Tensor, token_indices: torch.Tensor,
                             valid_token_count: Optional[torch.Tensor] = None) -> None:
    torch.ops.mslk.scatter_add_dense_tokens(out_tokens, in_tokens, token_indices, valid_token_count)


def scatter_add_padded_tokens(in_tokens: torch.Tensor, token_counts: torch.Tensor, token_indices: torch.Tensor,
                              out_tokens: torch.Tensor) -> None:
    torch.ops.mslk.scatter_add_padded_tokens(in_tokens, token_counts, token_indices, out_tokens)
