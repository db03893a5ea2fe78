"""Process-group plumbing of the MoE layers: checking the groups against MoEArgs, the rank
layout, and the collectives (torch.distributed: NCCL on CUDA tensors, gloo on CPU tensors)."""

from dataclasses import dataclass
from typing import List

import torch
import torch.distributed as dist

from .args import MoEArgs


@dataclass(frozen=True)
class Layout:
    """Where this rank sits. ep_mp_group rank g = ep_rank * mp_size + mp_rank; the ep_group holds the
    ranks of one mp_rank, in ep order. Routed weights: hidden slice mp_rank % r (r = routed MP
    size); the mp_size // r ranks sharing a slice split the tokens (chunk mp_rank // r)."""

    ep_rank: int
    mp_rank: int
    routed_slice: int
    token_chunk: int
    token_chunks: int


def _size(group) -> int:
    return dist.get_world_size(group)


def layout(args: MoEArgs, ep_group, ep_mp_group, owner: str) -> Layout:
    if args.ep_size > 1 or args.mp_size > 1:
        if not dist.is_available() or not dist.is_initialized():
            raise ValueError(f"{owner}: ep_size/mp_size > 1 need an initialized torch.distributed")
    if args.ep_size > 1:
        if ep_group is None or _size(ep_group) != args.ep_size:
            got = None if ep_group is None else _size(ep_group)
            raise ValueError(f"{owner}: argument 'ep_group' must have ep_size ({args.ep_size}) ranks, got {got}")
    if args.mp_size > 1:
        want = args.ep_size * args.mp_size
        if ep_mp_group is None or _size(ep_mp_group) != want:
            got = None if ep_mp_group is None else _size(ep_mp_group)
            raise ValueError(f"{owner}: argument 'ep_mp_group' must have ep_size * mp_size ({want}) ranks, got {got}")
    g = dist.get_rank(ep_mp_group) if args.mp_size > 1 else 0
    ep_rank, mp_rank = divmod(g, args.mp_size)
    if args.ep_size > 1:
        if dist.get_rank(ep_group) < 0:
            raise ValueError(f"{owner}: argument 'ep_group' does not contain this rank")
        if args.mp_size > 1:
            mp_ranks = dist.get_process_group_ranks(ep_mp_group)
            want = [mp_ranks[e * args.mp_size + mp_rank] for e in range(args.ep_size)]
            if dist.get_process_group_ranks(ep_group) != want:
                raise ValueError(f"{owner}: argument 'ep_group' must hold the ep_mp_group ranks {want} of this "
                                 f"rank's mp slot (ep_mp rank = ep_rank * mp_size + mp_rank), got "
                                 f"{dist.get_process_group_ranks(ep_group)}")
        ep_rank = dist.get_rank(ep_group)
    r = args.routed_mp_size
    return Layout(ep_rank, mp_rank, mp_rank % r, mp_rank // r, args.mp_size // r)


def all_to_all(x: torch.Tensor, out_splits: List[int], in_splits: List[int], group) -> torch.Tensor:
    out = x.new_empty((sum(out_splits),) + tuple(x.shape[1:]))
    dist.all_to_all_single(out, x.contiguous(), out_splits, in_splits, group=group)
    return out


def all_gather(x: torch.Tensor, group) -> torch.Tensor:
    """Concatenation along dim 0 of x from every rank (same shape everywhere)."""
    n = _size(group)
    out = x.new_empty((n * x.shape[0],) + tuple(x.shape[1:]))
    dist.all_gather_into_tensor(out, x.contiguous(), group=group)
    return out


def reduce_scatter(x: torch.Tensor, group) -> torch.Tensor:
    """Sum over ranks of x [n * T, ...], rank i keeping rows [i*T, (i+1)*T)."""
    n, i = _size(group), dist.get_rank(group)
    T = x.shape[0] // n
    if dist.get_backend(group) == "gloo":  # gloo has no reduce_scatter
        # Sum in float32 so the result does not depend on gloo's reduction order in bf16.
        y = x.float()
        dist.all_reduce(y, group=group)
        return y[i * T:(i + 1) * T].to(x.dtype)
    out = x.new_empty((T,) + tuple(x.shape[1:]))
    dist.reduce_scatter_tensor(out, x.contiguous(), group=group)
    return out
