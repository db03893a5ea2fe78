"""MoE routing and token movement (`mslk.moe`).

index_shuffling(routing_scores [T, E] bf16/fp32, expert_index_start=None, expert_index_end=None,
valid_token_count=None, top_k=1) -> (token_counts [E+2], expert_indices [T*top_k],
token_indices [T*top_k]), all int32:
- each token t < valid_token_count picks its top_k experts in torch.topk order (larger score
  first, NaN above +inf, equal scores: lower expert index first);
- picks of experts in [start, end) are grouped by expert, ascending token order inside a
  segment (CPU and CUDA give the same bits);
  expert_indices are local (minus start); token_counts[e] counts them (0 outside the range);
- token_counts[-2] = T (all input rows), token_counts[-1] = the number of picks kept, which
  bounds the valid prefix of the index arrays (later entries are 0).
Any E in [1, 512], top_k in [1, min(8, E)]. Unlike the reference, the op also runs on the CPU,
so the alias is always set.
"""

import torch

from mslk import _native, _ops  # noqa: F401  (registers the ops)
from mslk.moe.activation import silu_mul, silu_mul_quant  # noqa: F401
from mslk.moe.gather_scatter import (  # noqa: F401
    gather_scale_dense_tokens,
    gather_scale_quant_dense_tokens,
    scatter_add_dense_tokens,
    scatter_add_padded_tokens,
)
from mslk.moe.shuffling import combine_shuffling, split_shuffling  # noqa: F401

# Raw ops; None in Python-only mode (MSLK_PYTHON_ONLY=1), where no native op exists.
index_shuffling = torch.ops.mslk.index_shuffling if _native.load() else None
scatter_add_along_first_dim = torch.ops.mslk.scatter_add_along_first_dim if _native.load() else None
