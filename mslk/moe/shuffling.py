"""Expert-token shuffling across ranks (`mslk.moe.shuffling`): thin wrappers over torch.ops.mslk.

tokens [T, D] hold blocks of rows per (rank, expert), token_counts [EP, E] their sizes.
combine_shuffling reorders rank-major blocks (rank r's experts in order; with is_padded each
rank's blocks start at r * T // EP) into expert-major / rank-minor order for the experts
[expert_start, expert_end), and returns the per-local-expert counts [EG + 1] (last: the total).
split_shuffling is its inverse. Rows the op does not write are unspecified (zero when
init_with_zeros=True).
"""

from typing import Optional

import torch

from mslk import _ops  # noqa: F401  (registers the ops)


def combine_shuffling(tokens: torch.Tensor, token_counts: torch.Tensor, expert_start: Optional[int] = None,
                      expert_end: Optional[int] = None, is_padded: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.ops.mslk.combine_shuffling(tokens, token_counts, expert_start, expert_end, is_padded)


def split_shuffling(tokens: torch.Tensor, token_counts: torch.Tensor, expert_start: Optional[int] = None,
                    expert_end: Optional[int] = None, is_padded: bool = False,
                    init_with_zeros: bool = False) -> torch.Tensor:
    return torch.ops.mslk.split_shuffling(tokens, token_counts, expert_start, expert_end, is_padded, init_with_zeros)
