"""BF16 grouped GEMMs reject bad arguments with errors that name the op and the argument."""

import pytest
import torch

from test.gemm.bf16_grouped_reference import rand_bf16

ops = torch.ops.mslk


def _args(device="cpu"):
    return rand_bf16((6, 16), device), rand_bf16((2, 8, 16), device), torch.tensor([2, 4], device=device)


def test_dtype():
    x, w, ms = _args()
    with pytest.raises(TypeError, match="bf16bf16bf16_grouped_stacked: argument 'X' must have dtype BFloat16"):
        ops.bf16bf16bf16_grouped_stacked(x.float(), w, ms)
    with pytest.raises(TypeError, match="argument 'M_sizes' must have dtype Int, Long"):
        ops.bf16bf16bf16_grouped_stacked(x, w, ms.float())
    with pytest.raises(TypeError, match="argument 'out' must have dtype BFloat16"):
        ops.bf16bf16bf16_grouped_stacked(x, w, ms, torch.empty(6, 8, dtype=torch.float16))
    with pytest.raises(TypeError, match="argument 'out' must have dtype BFloat16"):  # float32: the forward only
        ops.bf16bf16bf16_grouped_grad(x[:, :8], w, ms, torch.empty(6, 16))


def test_shapes():
    x, w, ms = _args()
    with pytest.raises(ValueError, match="same K"):
        ops.bf16bf16bf16_grouped_stacked(x[:, :8], w, ms)
    with pytest.raises(ValueError, match="one size per group \\(2\\)"):
        ops.bf16bf16bf16_grouped_stacked(x, w, torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="'W' must have 3 dimensions"):
        ops.bf16bf16bf16_grouped_stacked(x, w[0], ms)
    with pytest.raises(ValueError, match="same N"):
        ops.bf16bf16bf16_grouped_grad(rand_bf16((6, 4), "cpu"), w, ms)
    with pytest.raises(ValueError, match="same rows"):
        ops.bf16bf16bf16_grouped_wgrad(rand_bf16((6, 8), "cpu"), rand_bf16((5, 16), "cpu"), ms)
    with pytest.raises(ValueError, match="argument 'out' must have shape"):
        ops.bf16bf16bf16_grouped_stacked(x, w, ms, torch.empty(6, 9, dtype=torch.bfloat16))


def test_sizes_values():
    x, w, _ = _args()
    with pytest.raises(ValueError, match="must be non-negative, got -1 for group 0"):
        ops.bf16bf16bf16_grouped_stacked(x, w, torch.tensor([-1, 2]))
    with pytest.raises(ValueError, match="sums to 7, more than the 6 rows"):
        ops.bf16bf16bf16_grouped_stacked(x, w, torch.tensor([3, 4]))


def test_strides_and_num_sms():
    x, w, ms = _args()
    with pytest.raises(ValueError, match="stride 1 in its last dimension"):
        ops.bf16bf16bf16_grouped_stacked(x.t().contiguous().t(), w, ms)
    with pytest.raises(ValueError, match="'num_sms' must be positive"):
        ops.bf16bf16bf16_grouped_stacked(x, w, ms, num_sms=0)
    with pytest.raises(ValueError, match="must be contiguous"):
        ops.bf16bf16bf16_grouped_stacked(x, w, ms, torch.empty(8, 6, dtype=torch.bfloat16).t())


def test_wgrad_accum_needs_fp32_output():
    dy, x, ms = rand_bf16((6, 8), "cpu"), rand_bf16((6, 16), "cpu"), torch.tensor([2, 4])
    with pytest.raises(ValueError, match="output_accum=True requires a preallocated float32 'output'"):
        ops.bf16bf16bf16_grouped_wgrad(dy, x, ms, None, True)
    with pytest.raises(TypeError, match="argument 'output' must have dtype Float"):
        ops.bf16bf16bf16_grouped_wgrad(dy, x, ms, torch.zeros(2, 8, 16, dtype=torch.bfloat16), True)


def test_device_mismatch():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    x, w, ms = _args("cuda")
    with pytest.raises(RuntimeError, match="same device"):
        ops.bf16bf16bf16_grouped_stacked(x, w, ms.cpu())


def test_list_errors():
    with pytest.raises(ValueError, match="one tensor per group"):
        ops.bf16bf16bf16_grouped([rand_bf16((2, 4), "cpu")], [])
    with pytest.raises(ValueError, match="same N to concatenate"):
        ops.bf16bf16bf16_grouped_cat([rand_bf16((2, 4), "cpu")] * 2, [rand_bf16((3, 4), "cpu"), rand_bf16((5, 4), "cpu")])
