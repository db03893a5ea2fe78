"""Fake (Meta) implementations of the BF16 grouped GEMM ops (torch.ops.mslk.bf16bf16bf16_grouped*).

Shapes only; argument checks live in the C++ implementations.
"""

import torch


@torch.library.register_fake("mslk::bf16bf16bf16_grouped")
def _bf16_grouped(X, W):
    return [x.new_empty((x.shape[0], w.shape[0])) for x, w in zip(X, W)]


@torch.library.register_fake("mslk::bf16bf16bf16_grouped_cat")
def _bf16_grouped_cat(X, W):
    if len(X) == 0:  # as the C++ check says (no tensor to take a device and dtype from)
        raise ValueError("bf16bf16bf16_grouped_cat: argument 'X' (and 'W') must hold at least one group, "
                         "got empty lists")
    return X[0].new_empty((sum(x.shape[0] for x in X), W[0].shape[0]))


@torch.library.register_fake("mslk::bf16bf16bf16_grouped_dynamic")
def _bf16_grouped_dynamic(X, W, zero_start_index_M):
    return X.new_empty((X.shape[0], X.shape[1], W.shape[1]))


# The public ops with an optional output are routers (csrc/common/out_router.h); fakes belong to
# their internal pair: `_new` allocates, `_into` writes `out` and returns nothing.
@torch.library.register_fake("mslk::_bf16bf16bf16_grouped_stacked_new")
def _bf16_grouped_stacked_new(X, W, M_sizes, num_sms=None):
    return X.new_empty((X.shape[0], W.shape[1]))


@torch.library.register_fake("mslk::_bf16bf16bf16_grouped_grad_new")
def _bf16_grouped_grad_new(X, W, M_sizes, num_sms=None):
    return X.new_empty((X.shape[0], W.shape[2]))


@torch.library.register_fake("mslk::_bf16bf16bf16_grouped_wgrad_new")
def _bf16_grouped_wgrad_new(X, W, M_sizes, output_accum=False, num_sms=None):
    return X.new_empty((M_sizes.shape[0], X.shape[1], W.shape[1]))


@torch.library.register_fake("mslk::_bf16bf16bf16_grouped_stacked_into")
@torch.library.register_fake("mslk::_bf16bf16bf16_grouped_grad_into")
def _bf16_grouped_stacked_into(X, W, M_sizes, out, num_sms=None):
    return None


@torch.library.register_fake("mslk::_bf16bf16bf16_grouped_wgrad_into")
def _bf16_grouped_wgrad_into(X, W, M_sizes, output, output_accum=False, num_sms=None):
    return None
