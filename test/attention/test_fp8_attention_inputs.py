"""FP8 attention's input names (spec "Attention - Operator protocol & inputs"): InputsFp8 at both
of its import paths, ScaledTensor, pack_fp8_tensorwise_per_head and bmhk2bhk. No FP8 attention
kernel exists yet: these compute on their own, and an attention call with FP8 inputs is declined
with the operators' reasons."""

import copy
import dataclasses
import io

import pytest
import torch

from mslk.attention import fmha
from mslk.attention.fmha import common, triton_splitk
from mslk.attention.fmha.common import ScaledTensor, bmhk2bhk, pack_fp8_tensorwise_per_head
from test.conftest import DEVICES

E4M3 = torch.float8_e4m3fn


def _per_head_quantize(x):
    """Reference FP8 per-head quantizer: amax over M and K of each (batch, head); returns the FP8
    data and the dequantization multiplier [B, *heads]."""
    dims = (1, x.ndim - 1)
    amax = x.abs().amax(dim=dims).double().clamp(min=1e-12)
    descale = (amax / torch.finfo(E4M3).max).float()
    shape = (x.shape[0], 1, *x.shape[2:-1], 1)
    return (x.double() / descale.double().reshape(shape)).to(E4M3), descale


# --- InputsFp8 -------------------------------------------------------------------------------

def test_inputs_fp8_is_one_class_at_both_paths():
    assert triton_splitk.InputsFp8 is common.InputsFp8
    assert issubclass(common.InputsFp8, common.Inputs)
    names = [f.name for f in dataclasses.fields(common.InputsFp8)]
    assert names[-3:] == ["k_fp8_scale_shift", "v_fp8_scale_shift", "q_fp8_scale_shift"]
    assert names[:-3] == [f.name for f in dataclasses.fields(common.Inputs)]


def test_inputs_fp8_carries_packed_kv():
    # FP8 rowwise K/V cache: 4 FP8 values viewed as one int32, one packed fp16 (scale, shift) per row.
    B, M, H, D = 2, 6, 3, 16
    q = torch.randn(B, 1, H, D, dtype=torch.bfloat16)
    k8 = torch.randn(B, M, H, D).to(E4M3)
    k = k8.view(torch.int32)
    assert k.shape == (B, M, H, D // 4)
    scale_shift = torch.stack([torch.full((B, M, H), 0.5, dtype=torch.float16),
                               torch.zeros(B, M, H, dtype=torch.float16)], -1).view(torch.int32)[..., 0]
    inp = triton_splitk.InputsFp8(q, k, k, k_fp8_scale_shift=scale_shift, v_fp8_scale_shift=scale_shift)
    assert inp.q_fp8_scale_shift is None and inp.use_fp32_scales is False and inp.num_splits == 0
    assert torch.equal(inp.key.view(E4M3).view(torch.uint8), k8.view(torch.uint8))
    unpacked = inp.k_fp8_scale_shift.view(torch.float16).reshape(B, M, H, 2)
    assert torch.equal(unpacked[..., 0], torch.full((B, M, H), 0.5, dtype=torch.float16))
    again = dataclasses.replace(inp, use_fp32_scales=True)
    assert type(again) is common.InputsFp8 and again.k_fp8_scale_shift is scale_shift
    # The operator reads this cache (test_decode_quantized.py) but declares CUDA only: CPU inputs are declined.
    reasons = triton_splitk.FwOp.not_supported_reasons(inp)
    assert any("device" in r or "not available" in r for r in reasons)
    assert not [r for r in reasons if "FP8 K/V" in r]
    assert not triton_splitk.FwOp_S4.supports(inp)


# --- ScaledTensor ----------------------------------------------------------------------------

def test_scaled_tensor_holds_storage_and_scale():
    data = torch.tensor([[1.0, -2.0], [0.5, 4.0]]).to(E4M3)
    scale = torch.tensor([2.0, 0.25])
    st = ScaledTensor(data, scale, lambda d, s: d.float() * s[:, None], torch.float16)
    assert isinstance(st, torch.Tensor) and type(st) is ScaledTensor
    assert st.dtype == E4M3 and st.shape == (2, 2) and not st.requires_grad
    plain, sc = st.unpack()
    assert type(plain) is torch.Tensor and sc is scale
    assert plain.data_ptr() == data.data_ptr()  # a view, no copy
    out = st.dequantize()
    assert out.dtype == torch.float16
    assert torch.equal(out, torch.tensor([[2.0, -4.0], [0.125, 1.0]], dtype=torch.float16))
    # Operations give plain tensors: the scale does not silently follow a slice.
    assert type(st[0]) is torch.Tensor and type(st.float()) is torch.Tensor
    assert "ScaledTensor" in repr(st) and "float16" in repr(st)


def test_scaled_tensor_copies_keep_the_scale():
    x = torch.randn(2, 4, 3, 8)
    xq, descale = _per_head_quantize(x)
    st = pack_fp8_tensorwise_per_head(xq, descale, torch.bfloat16)
    dup = copy.deepcopy(st)
    assert type(dup) is ScaledTensor and dup.data_ptr() != st.data_ptr()
    assert torch.equal(dup.dequantize(), st.dequantize()) and dup.original_dtype == torch.bfloat16
    buf = io.BytesIO()
    torch.save(st, buf)
    buf.seek(0)
    back = torch.load(buf, weights_only=False)
    assert type(back) is ScaledTensor and torch.equal(back.dequantize(), st.dequantize())


@pytest.mark.parametrize("args,exc,word", [
    (("not a tensor", torch.ones(1), abs, torch.float32), TypeError, "data"),
    ((torch.ones(2), 1.0, abs, torch.float32), TypeError, "scale"),
    ((torch.ones(2), torch.ones(1), None, torch.float32), TypeError, "dequant_func"),
    ((torch.ones(2), torch.ones(1), abs, "float32"), TypeError, "original_dtype"),
])
def test_scaled_tensor_rejects_bad_arguments(args, exc, word):
    with pytest.raises(exc, match=word):
        ScaledTensor(*args)


# --- pack_fp8_tensorwise_per_head ------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(2, 5, 3, 16), (3, 4, 2, 2, 8), (2, 7, 32)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_pack_per_head_round_trip(device, shape, dtype):
    torch.manual_seed(0)
    x = (torch.randn(shape, device=device) * torch.logspace(-2, 2, shape[0], device=device).reshape(-1, *[1] * (len(shape) - 1)))
    xq, descale = _per_head_quantize(x)
    st = pack_fp8_tensorwise_per_head(xq, descale, dtype)
    assert st.scale.shape == (shape[0], *shape[2:-1]) and st.scale.dtype == torch.float32
    assert st.scale.device == x.device and st.dtype == E4M3 and st.shape == shape
    out = st.dequantize()
    assert out.dtype == dtype and out.shape == shape and out.device == x.device
    # Exact: each FP8 value times its head's scale, rounded once to the output dtype.
    bshape = (shape[0], 1, *shape[2:-1], 1)
    want = (xq.double() * descale.double().reshape(bshape)).to(dtype)
    torch.testing.assert_close(out, want, atol=0, rtol=2 ** -7 if dtype is torch.float32 else 0)
    # Round trip: E4M3 keeps 3 mantissa bits (relative step 2^-3, half of it after rounding).
    amax = x.abs().amax(dim=(1, x.ndim - 1), keepdim=True)
    err = (out.double() - x.double()).abs()
    assert (err <= x.double().abs() * 2 ** -4 + amax.double() * 2 ** -9 + 1e-30).all()


@pytest.mark.parametrize("device", DEVICES)
def test_pack_tensorwise_scales(device):
    xq = torch.randn(2, 3, 4, 8, device=device).to(E4M3)
    base = xq.double()
    for scale in (0.5, 3, torch.tensor(0.5, device=device), torch.tensor([0.5], device=device, dtype=torch.float64)):
        st = pack_fp8_tensorwise_per_head(xq, scale, torch.float32)
        assert st.scale.shape == (2, 4) and st.scale.dtype == torch.float32
        want = base * float(scale)
        torch.testing.assert_close(st.dequantize().double(), want, atol=0, rtol=2 ** -24)
    # Per head given as [H] broadcasts over the batch.
    st = pack_fp8_tensorwise_per_head(xq, torch.tensor([1.0, 2.0, 4.0, 8.0], device=device), torch.float32)
    assert torch.equal(st.scale, torch.tensor([[1.0, 2.0, 4.0, 8.0]] * 2, device=device))
    assert torch.equal(st.dequantize()[:, :, 3], xq[:, :, 3].float() * 8)


@pytest.mark.parametrize("args,exc,word", [
    ((torch.ones(2, 3, 4, 8), 1.0, torch.bfloat16), TypeError, "x must be an FP8"),
    ((torch.ones(2, 8).to(E4M3), 1.0, torch.bfloat16), ValueError, "x must be"),
    ((torch.ones(2, 3, 4, 8).to(E4M3), torch.ones(3, 4), torch.bfloat16), ValueError, "scale of shape"),
    ((torch.ones(2, 3, 4, 8).to(E4M3), torch.ones(2, 4, dtype=torch.int32), torch.bfloat16), TypeError, "scale"),
    ((torch.ones(2, 3, 4, 8).to(E4M3), "1.0", torch.bfloat16), TypeError, "scale"),
    ((torch.ones(2, 3, 4, 8).to(E4M3), 1.0, torch.int8), TypeError, "original_dtype"),
])
def test_pack_rejects_bad_arguments(args, exc, word):
    with pytest.raises(exc, match=word):
        pack_fp8_tensorwise_per_head(*args)


def test_fp8_attention_is_declined_with_reasons():
    torch.manual_seed(0)
    q, k, v = (pack_fp8_tensorwise_per_head(*_per_head_quantize(torch.randn(1, 8, 2, 64)), torch.bfloat16)
               for _ in range(3))
    with pytest.raises(NotImplementedError, match="float8_e4m3fn"):
        fmha.memory_efficient_attention(q, k, v)
    with pytest.raises(ValueError, match="float8_e4m3fn"):  # an explicit operator: ValueError with its reasons
        fmha.memory_efficient_attention_forward(q, k, v, op=fmha.cutlass.FwOp)
    # Dequantized, the same inputs run (the fake-quantized reference a kernel will be tested against).
    out = fmha.memory_efficient_attention(q.dequantize().float(), k.dequantize().float(), v.dequantize().float())
    assert out.shape == (1, 8, 2, 64) and torch.isfinite(out).all()


# --- bmhk2bhk --------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_bmhk2bhk_folds_batch_into_tokens(device):
    x = torch.randn(2, 5, 3, 8, device=device)
    scale = torch.randn(2, 5, 3, device=device)
    y, s = bmhk2bhk(x, scale)
    assert y.shape == (10, 3, 8) and s.shape == (10, 3)
    assert torch.equal(y[7], x[1, 2]) and torch.equal(s[7], scale[1, 2])
    assert y.data_ptr() == x.data_ptr()  # contiguous input: a view
    y, s = bmhk2bhk(x, torch.randn(2, 5, 3, 2, device=device))
    assert s.shape == (10, 3, 2)
    assert bmhk2bhk(x)[1] is None


@pytest.mark.parametrize("device", DEVICES)
def test_bmhk2bhk_mqa(device):
    base = torch.randn(1, 6, 1, 8, device=device)
    k = base.expand(1, 6, 4, 8)  # MQA: one K/V head expanded to 4 query heads
    scale = torch.randn(1, 6, 1, device=device).expand(1, 6, 4)
    y, s = bmhk2bhk(k, scale)
    assert y.shape == (6, 1, 8) and s.shape == (6, 1)
    assert torch.equal(y[:, 0], base[0, :, 0]) and y.data_ptr() == base.data_ptr()
    y, s = bmhk2bhk(k, scale, handle_mqa=False)  # a gradient or output keeps every head
    assert y.shape == (6, 4, 8) and s.shape == (6, 4)
    assert torch.equal(y, base[0].expand(6, 4, 8))
    y, _ = bmhk2bhk(base)  # one real head is not MQA
    assert y.shape == (6, 1, 8)


def test_bmhk2bhk_other_ranks_and_bad_scale():
    for shape in [(2, 5, 8), (1, 5, 2, 3, 8)]:
        x = torch.randn(shape)
        y, s = bmhk2bhk(x)
        assert y is x and s is None
    with pytest.raises(ValueError, match="x_scale"):
        bmhk2bhk(torch.randn(2, 5, 3, 8), torch.randn(2, 5, 4))
