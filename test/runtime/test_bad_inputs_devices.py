"""The bad-input sweep's valid calls (test_bad_inputs.CASES) on cuda:0 with one tensor argument on
cuda:1: the op must refuse it with an error naming that argument, or compute exactly what the
call with every tensor on cuda:0 computes. Needs two GPUs."""

import pytest
import torch

from test.conftest import requires_gpus
from test.runtime.test_bad_inputs import HOST_ARGS, CASES, _clone, _flat, _op_name, _same, names_argument


def _to(v, device):
    if isinstance(v, torch.Tensor):
        return v.to(device)
    if isinstance(v, list):
        return [_to(x, device) for x in v]
    if isinstance(v, torch.device):
        return torch.device(device)
    return v


def _cases():
    out = []
    for op, kwargs, _ in CASES:
        for arg, val in kwargs.items():
            first = val[0] if isinstance(val, list) and val else val
            if arg in HOST_ARGS or not isinstance(first, torch.Tensor):
                continue
            out.append(pytest.param(op, kwargs, arg, id=f"{_op_name(op)}-{arg}"))
    return out


@requires_gpus(2)
@pytest.mark.parametrize("op,kwargs,arg", _cases())
def test_tensor_on_another_gpu(op, kwargs, arg):
    good = {k: v if k in HOST_ARGS else _to(v, "cuda:0") for k, v in _clone(kwargs).items()}
    bad = {k: v if k in HOST_ARGS else _to(v, "cuda:0") for k, v in _clone(kwargs).items()}
    moved = bad[arg]
    bad[arg] = [_to(moved[0], "cuda:1")] + moved[1:] if isinstance(moved, list) else _to(moved, "cuda:1")
    try:
        got = op(**bad)
    except (ValueError, TypeError, RuntimeError) as e:
        assert names_argument(op, arg, str(e)), \
            f"{_op_name(op)}: the error for '{arg}' on cuda:1 does not name it: {str(e)[:300]}"
        return
    want = op(**good)
    if got is None:  # an in-place op: compare what it wrote
        got, want = bad, good
    assert _same(_to(_flat(got), "cpu"), _to(_flat(want), "cpu")), \
        f"{_op_name(op)} accepted '{arg}' on cuda:1 but computed something else"
