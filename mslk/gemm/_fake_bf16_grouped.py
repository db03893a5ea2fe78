"""Fake (Meta) implementations of the BF16 grouped GEMM ops (torch.ops.mslk.bf16bf16bf16_grouped*).

Shapes only; argument checks live in the C++ implementations.
"""

import torch


@torch.library.register_fake("mslk::bf16bf16bf16_grouped")
def _bf16_grouped(X, W):
    return [x.new_empty((x.shape[0], w.shape[0])) for x, w in zip(X, W)]


@torch.library.register_fake("mslk::bf16bf16bf16_grouped_cat")
def _bf16_grouped_cat(X, W):
    return X[0].new_empty((sum(x.shape[0] for x in X), W[0].shape[0]))


@torch.library.register_fake("mslk::bf16bf16bf16_grouped_dynamic")
def _bf16_grouped_dynamic(X, W, zero_start_index_M):
    return X.new_empty((X.shape[0], X.shape[1], W.shape[1]))


@torch.library.register_fake("mslk::bf16bf16bf16_grouped_stacked")
def _bf16_grouped_stacked(X, W, M_sizes, out=None, num_sms=None):
    if out is not None:
        return out
    return X.new_empty((X.shape[0], W.shape[1]))


@torch.library.register_fake("mslk::bf16bf16bf16_grouped_grad")
def _bf16_grouped_grad(X, W, M_sizes, out=None, num_sms=None):
    if out is not None:
        return out
    return X.new_empty((X.shape[0], W.shape[2]))


@torch.library.register_fake("mslk::bf16bf16bf16_grouped_wgrad")
def _bf16_grouped_wgrad(X, W, M_sizes, output=None, output_accum=False, num_sms=None):
    if output is not None:
        return output
    return X.new_empty((M_sizes.shape[0], X.shape[1], W.shape[1]))
