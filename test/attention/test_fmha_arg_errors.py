"""Argument errors of the attention entry points that name the argument: a non-float output_dtype
(every forward and merge_attentions), merge_attentions shards of the wrong dtype or shape."""

import pytest
import torch

from mslk.attention import fmha
from test.conftest import DEVICES

BAD_DTYPES = [torch.int32, torch.int64, torch.bool, torch.float8_e4m3fn, torch.complex64]


def _qkv(device, requires_grad=False):
    return [torch.randn(1, 6, 2, 8, device=device, requires_grad=requires_grad) for _ in range(3)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", BAD_DTYPES)
def test_output_dtype_not_float(device, dtype):
    q, k, v = _qkv(device)
    for fn in (fmha.memory_efficient_attention, fmha.memory_efficient_attention_forward,
               fmha.memory_efficient_attention_forward_requires_grad, fmha.memory_efficient_attention_partial):
        with pytest.raises(TypeError, match=rf"{fn.__name__}: output_dtype must be None or one of .*got {dtype}"):
            fn(q, k, v, output_dtype=dtype)
    q, k, v = _qkv(device, requires_grad=True)  # the autograd path checks too
    with pytest.raises(TypeError, match="output_dtype"):
        fmha.memory_efficient_attention(q, k, v, output_dtype=dtype)
    attn, lse = torch.zeros(2, 1, 6, 2, 8, device=device), torch.zeros(2, 1, 2, 6, device=device)
    with pytest.raises(TypeError, match="merge_attentions: output_dtype"):
        fmha.merge_attentions(attn, lse, output_dtype=dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_float_output_dtypes_still_run(device):
    q, k, v = _qkv(device)
    for dtype in (torch.float32, torch.float64):
        assert fmha.memory_efficient_attention(q, k, v, output_dtype=dtype).dtype == dtype


@pytest.mark.parametrize("device", DEVICES)
def test_merge_attentions_dtype_errors(device):
    attn, lse = torch.zeros(2, 1, 6, 2, 8, device=device), torch.zeros(2, 1, 2, 6, device=device)
    with pytest.raises(TypeError, match=r"merge_attentions: attn_split must be .*got torch.int32"):
        fmha.merge_attentions(attn.int(), lse)
    with pytest.raises(TypeError, match=r"merge_attentions: lse_split must be torch.float32 / torch.float64; "
                                        r"got torch.int32"):
        fmha.merge_attentions(attn, lse.int())
    with pytest.raises(TypeError, match=r"lse_split must be .*got torch.bfloat16"):
        fmha.merge_attentions(attn, lse.bfloat16())
    with pytest.raises(TypeError, match=r"merge_attentions: lse_split\[1\] must be .*got torch.int32"):
        fmha.merge_attentions(list(attn), [lse[0], lse[1].int()])
    with pytest.raises(TypeError, match=r"merge_attentions: attn_split\[0\] must be a tensor; got list"):
        fmha.merge_attentions([[1.0]], list(lse))


@pytest.mark.parametrize("device", DEVICES)
def test_merge_attentions_shape_messages(device):
    attn, lse = torch.zeros(2, 1, 6, 2, 8, device=device), torch.zeros(2, 1, 2, 6, device=device)
    with pytest.raises(ValueError, match=r"lse_split \(stacked\) must be \[S, B, \(G,\) H, M\] = \(2, 1, 2, 6\) "
                                         r"for attn_split \(2, 1, 6, 2, 8\); got \(2, 1, 2, 5\)"):
        fmha.merge_attentions(attn, lse[..., :5])
    with pytest.raises(ValueError, match=r"attn_split \(stacked\) must be \[S, B, M, H, K\] or \[S, B, M, G, H, K\]; "
                                         r"got \(2, 6, 2, 8\)"):
        fmha.merge_attentions(attn[:, 0], lse)
    with pytest.raises(ValueError, match=r"the tensors of attn_split must have one shape; attn_split\[0\] is "
                                         r"\(1, 6, 2, 8\), attn_split\[1\] is \(1, 5, 2, 8\)"):
        fmha.merge_attentions([attn[0], attn[1][:, :5]], list(lse))
    with pytest.raises(ValueError, match="merge_attentions: attn_split is empty"):
        fmha.merge_attentions([], [])
