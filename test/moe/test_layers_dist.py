"""mslk.moe.layers with world size 2 (processes spawned here; gloo on the CPU, NCCL on two GPUs,
gloo with both ranks on one GPU: the GPU kernels without a second GPU): EP=2 and MP=2 (including
routed MP 1 with token chunks, and dedup_comm) give the EP=1 result, with skewed routing that
leaves a rank's experts without tokens; mismatched groups are refused."""

import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from mslk.moe.layers import BaselineMoE, MetaShufflingMoE
from test.conftest import requires_gpus
from test.moe.test_layers import LAYERS, TOL, init_methods, make_args, make_weights, make_x, reference, rel_err

WORLD = 2
PRECISIONS = ("bf16", "fp8_rowwise")


def _close(out, want, x, w, top_k, precision, what):
    # Against the one-rank layer (same kernels, other summation order) and the float64 reference.
    e1, e2 = rel_err(out, want), rel_err(out, reference(x, w, top_k))
    assert e1 < TOL[precision] / 2 and e2 < TOL[precision], (what, e1, e2)


def _ep_cases(rank, device):
    world = dist.group.WORLD
    for cls, top_k, static in LAYERS:
        for precision in PRECISIONS:
            for skew in (False, True):
                w = make_weights(skew=skew)
                # Each EP rank holds its own tokens; the dynamic path also takes unequal counts.
                x = make_x(T=8 if static else 8 + 4 * rank, seed=1 + rank, skew=skew)
                one = make_args(precision, top_k)
                want = cls(None, None, one).build(init_methods(w, one), device=device)(x.to(device), static)
                args = make_args(precision, top_k, ep=2)
                m = cls(world, world, args).build(init_methods(w, args, ep_rank=rank), device=device)
                _close(m(x.to(device), static), want, x, w, top_k, precision, (cls.__name__, "ep2", static, skew))


MP_CASES = [  # (layer, top_k, static, mp_size_for_routed_experts, dedup_comm)
    (BaselineMoE, 2, False, None, False),
    (BaselineMoE, 2, False, 1, False),
    (MetaShufflingMoE, 1, False, None, False),
    (MetaShufflingMoE, 1, True, None, False),
    (MetaShufflingMoE, 1, True, None, True),
    (MetaShufflingMoE, 1, False, None, True),
]


def _mp_cases(rank, device):
    world = dist.group.WORLD
    for cls, top_k, static, routed, dedup in MP_CASES:
        for precision in PRECISIONS:
            w = make_weights(skew=True)
            x = make_x(seed=1, skew=True)  # model-parallel ranks hold the same tokens
            one = make_args(precision, top_k)
            want = cls(None, None, one).build(init_methods(w, one), device=device)(x.to(device), static)
            args = make_args(precision, top_k, mp=2, mp_routed=routed, dedup=dedup)
            m = cls(None, world, args).build(init_methods(w, args, mp_rank=rank), device=device)
            out = m(x.to(device), static).float()
            dist.all_reduce(out)  # the caller's model-parallel all-reduce
            _close(out, want, x, w, top_k, precision, (cls.__name__, "mp2", static, routed, dedup))


def _error_cases(rank):
    world = dist.group.WORLD
    singles = [dist.new_group([r]) for r in range(WORLD)]  # collective: every rank makes both
    mine = singles[rank]
    with pytest.raises(ValueError, match="'ep_group'"):
        BaselineMoE(mine, world, make_args(ep=2))
    with pytest.raises(ValueError, match="'ep_mp_group'"):
        BaselineMoE(None, mine, make_args(mp=2))
    with pytest.raises(ValueError, match="'moe_args.mp_size_for_routed_experts'"):
        MetaShufflingMoE(None, world, make_args(mp=2, mp_routed=1))
    m = MetaShufflingMoE(None, world, make_args(mp=2, dedup=True)).build(device="cpu")
    with pytest.raises(ValueError, match="'x'"):
        m(make_x(T=3, B=1), True)


def _worker(rank, store, backend, one_gpu=False):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    device = "cpu"
    if backend == "nccl":
        torch.cuda.set_device(rank)
        device = f"cuda:{rank}"
    elif one_gpu:  # both ranks on cuda:0; gloo moves CUDA tensors through pinned host memory
        torch.cuda.set_device(0)
        device = "cuda:0"
    dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=WORLD)
    try:
        _ep_cases(rank, device)
        _mp_cases(rank, device)
        if backend == "gloo" and not one_gpu:  # configuration errors: the CPU run covers them
            _error_cases(rank)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _spawn(tmp_path, backend, one_gpu=False):
    mp.spawn(_worker, args=(str(tmp_path / "store"), backend, one_gpu), nprocs=WORLD, join=True)


def test_world2_gloo(tmp_path):
    _spawn(tmp_path, "gloo")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_world2_gloo_one_gpu(tmp_path):
    """World size 2 on the GPU kernels with one GPU: the layers' collectives over gloo."""
    _spawn(tmp_path, "gloo", one_gpu=True)


@requires_gpus(2)
@pytest.mark.skipif(not dist.is_nccl_available(), reason="torch.distributed is built without NCCL")
def test_world2_nccl(tmp_path):
    _spawn(tmp_path, "nccl")
