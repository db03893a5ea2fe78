"""Spec symbols that need absent hardware or FP4/MX formats: present, one error message, fakes work.

Every such Python function and torch op raises
RuntimeError("<qualified name>: not available on this platform: <reason>") (mslk.utils.unavailable);
its constants are real; the torch ops' fake implementations give the spec's output shapes.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import mslk  # noqa: F401  (registers the ops)
from mslk.utils import unavailable

REPO = Path(__file__).resolve().parents[2]
SURFACE_TOOL = REPO.parent / "shared" / "tools" / "spec_surface.py"

STUB_MODULES = [
    "mslk.attention.mla", "mslk.attention.mla.triton_mla",
    "mslk.attention.flydsl", "mslk.attention.flydsl.flash_attn_interface",
    "mslk.attention.cutlass_blackwell_fmha",
    "mslk.attention.cutlass_blackwell_fmha.cutlass_blackwell_fmha_interface",
    "mslk.attention.cutlass_blackwell_fmha.cutlass_blackwell_fmha_custom_op",
    "mslk.gemm.blackwell_mixed_input_gemm", "mslk.gemm.triton.f4f4bf16", "mslk.gemm.triton.mx8mx4_gemm",
    "mslk.gemm.triton.mx8mx8_gemm", "mslk.gemm.triton.fp8_gemm",
    "mslk.quantize.triton.fp4_quantize", "mslk.quantize.triton.fp4_utils", "mslk.quantize.triton.fp4_primitives",
    "mslk.quantize.triton.quantize_kernels.mx4", "mslk.quantize.triton.quantize_kernels.mx4_stacked",
    "mslk.quantize.mx_mixed_dtype_utils",
]


def _stubs():
    seen = {}
    for name in STUB_MODULES:
        mod = importlib.import_module(name)
        for obj in vars(mod).values():
            candidates = [obj] + (list(vars(obj).values()) if inspect.isclass(obj) else [])
            for c in candidates:
                q = getattr(c, "__mslk_unavailable__", None)
                if q:
                    seen[q] = c
    return seen


STUBS = _stubs()


def _expect(qualname: str) -> str:
    return "^" + re.escape(f"{qualname}: not available on this platform: ") + r"\S"


def test_helper_message_form():
    err = unavailable.error("mslk.x.f", "because")
    assert isinstance(err, RuntimeError) and str(err) == "mslk.x.f: not available on this platform: because"
    assert str(unavailable.error("n", lambda: 1 / 0)).startswith("n: not available on this platform: ZeroDivisionError")


def test_every_python_stub_raises_the_one_message():
    # (cutlass_blackwell_fmha_func & co run the fused attention ops, the Blackwell decode facade the decode op)
    assert len(STUBS) >= 42, sorted(STUBS)
    for qualname, fn in STUBS.items():
        sig = inspect.signature(fn)
        args, kwargs = [], {}
        for p in sig.parameters.values():
            if p.default is not inspect.Parameter.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            if p.kind == p.KEYWORD_ONLY:
                kwargs[p.name] = None
            else:
                args.append(None)
        if qualname.endswith(".__call__"):
            args[0] = object()  # self
        with pytest.raises(RuntimeError, match=_expect(qualname)):
            fn(*args, **kwargs)


def test_stub_names_are_their_import_paths():
    for qualname, fn in STUBS.items():
        mod, _, attr = qualname.rpartition(".")
        if attr == "__call__":
            continue
        assert getattr(importlib.import_module(mod), attr) is fn, qualname


def test_constants_are_real():
    from mslk.attention.mla import triton_mla as mla
    from mslk.quantize import mx_mixed_dtype_utils as mx6
    from mslk.quantize.triton import fp4_primitives as prim
    from mslk.quantize.triton import fp4_quantize as fp4

    assert (mla.MLA_NUM_HEADS, mla.MLA_NUM_KV_HEADS, mla.MLA_KV_LORA_RANK, mla.MLA_QK_ROPE_HEAD_DIM,
            mla.MLA_QK_HEAD_DIM, mla.MLA_V_HEAD_DIM) == (128, 1, 512, 64, 576, 512)
    assert (fp4.FP4_E2M1_MAX, fp4.FP8_E4M3_MAX, fp4.FP4_EBITS, fp4.FP4_MBITS) == (6.0, 448, 2, 1)
    assert fp4.FP8_E4M3_MAX == torch.finfo(torch.float8_e4m3fn).max
    assert [m.value for m in fp4.RoundingMode] == [0, 1, 2, 3, 4]
    assert [m.name for m in fp4.RoundingMode] == ["nearest", "floor", "even", "stochastic", "ceil"]
    assert fp4.get_mx4_exp_bias(2) == 1 and fp4.get_mx4_exp_bias(8) == 127
    assert prim.E8M0_EXPONENT_BIAS.value == 127 and prim.BF16_MIN_NORMAL.value == 2.0**-126
    assert prim.BF16_MIN_NORMAL.value == torch.finfo(torch.bfloat16).tiny
    assert mx6.E2M3_MAX == 7.5 == max(mx6.E2M3_DECODE)
    assert len(mx6.E2M3_DECODE) == 64 and mx6.E2M3_DECODE[:9] == (0, .125, .25, .375, .5, .625, .75, .875, 1.0)
    assert mx6.E2M3_DECODE[32:] == tuple(-v for v in mx6.E2M3_DECODE[:32])
    from mslk.attention.cutlass_blackwell_fmha.cutlass_blackwell_fmha_interface import GenKernelType
    assert {GenKernelType.UMMA_I, GenKernelType.UMMA_P} == set(GenKernelType)


def test_mixed_input_kernel_object():
    from mslk.gemm.blackwell_mixed_input_gemm import MixedInputGemmKernel

    k = MixedInputGemmKernel(1, 128, torch.float32, False, (128, 128, 128), (1, 1), False)
    assert k.mma_tiler_mnk == (128, 128, 128) and MixedInputGemmKernel.can_implement() is False


# --- torch ops -------------------------------------------------------------------------------

def _t(*shape, dtype=torch.bfloat16):
    return torch.zeros(*shape, dtype=dtype)


U8, F8, I32 = torch.uint8, torch.float8_e4m3fn, torch.int32
M, N, K, G = 6, 10, 64, 3
_X4, _W4, _S = _t(M, K // 2, dtype=U8), _t(N, K // 2, dtype=U8), _t(8, dtype=U8)
_OFF = torch.tensor([2, 4, 6], dtype=I32)
_Q = torch.zeros(2, 5, 4, 16)
_KV = torch.zeros(2, 7, 4, 16)

# op -> (args, expected output shapes). Shapes follow the spec: X [M, K'] @ W [N, K'].T -> [M, N].
OPS = {
    "f4f4bf16": ((_X4, _W4, _S, _S), [(M, N)]),
    "f4f4bf16_grouped_mm": ((_X4, _t(G, N, K // 2, dtype=U8), _S, _S, _OFF), [(M, N)]),
    "f4f4bf16_grouped_stacked": ((_X4, _t(G, N, K // 2, dtype=U8), _S, _S, _OFF), [(M, N)]),
    "f4f4bf16_ultra_grouped_mm": ((_X4, _t(G, N, K // 2, dtype=U8), _S, _S, _OFF, _t(G, dtype=torch.float32),
                                   _t(G, dtype=torch.float32)), [(M, N)]),
    "mx8mx4bf16": ((_t(M, K, dtype=F8), _W4, _S, _S), [(M, N)]),
    "mx8mx4bf16_grouped_mm": ((_t(M, K, dtype=F8), _t(G, N, K // 2, dtype=U8), _S, _S, _OFF), [(M, N)]),
    "mx8mx8bf16_grouped_mm": ((_t(M, K, dtype=F8), _t(N, K, dtype=F8), _S, _S, _OFF), [(G, M, N)]),  # K-grouped
    "mx8mx6bf16": ((_t(M, K, dtype=F8), _t(N, 3 * K // 4, dtype=U8), _S, _S), [(M, N)]),
    "mx6mx6bf16": ((_t(M, 3 * K // 4, dtype=U8), _t(N, 3 * K // 4, dtype=U8), _S, _S), [(M, N)]),
    "f8f8bf16_conv": ((_t(2, 8, 9, 10, 16, dtype=F8), _t(4, 3, 3, 3, 16, dtype=F8), _t(1, dtype=torch.float32),
                       [1, 1, 1], [1, 2, 2], [1, 1, 1]), [(2, 8, 5, 5, 4)]),
    "fmha_fwd": ((_Q, _KV, _KV), [(2, 5, 4, 16), (2, 4, 5)]),
    "fmha_bwd": ((_Q, _Q, _KV, _KV, _Q, _t(2, 4, 5, dtype=torch.float32)), [(2, 5, 4, 16), (2, 7, 4, 16),
                                                                            (2, 7, 4, 16)]),
    "fmha_gen_fwd": ((_t(2, 1, 4, 16), _t(2, 2048, 1, 16), _t(2, 2048, 1, 16), _t(2, dtype=I32)),
                     [(2, 1, 4, 2, 16), (2, 2, 4, 1)]),
    "cutlass_blackwell_fmha_fwd": ((_Q, _KV, _KV, None, None, None, None, None, False, None, None),
                                   [(2, 5, 4, 16), (2, 4, 5)]),
    "cutlass_blackwell_fmha_bwd": ((_Q, _Q, _KV, _KV, _Q, _t(2, 4, 5, dtype=torch.float32), None, None, None, None,
                                    None, False), [(2, 5, 4, 16), (2, 7, 4, 16), (2, 7, 4, 16)]),
}


# Served by mslk's fused attention ops (mslk.attention.fmha._raw_bwd_ops) and its split-K decode op
# (fmha_gen_fwd, test_blackwell_decode.py); only their fakes are checked here.
SERVED = {"fmha_fwd", "fmha_bwd", "cutlass_blackwell_fmha_fwd", "cutlass_blackwell_fmha_bwd", "fmha_gen_fwd"}


@pytest.mark.parametrize("name", sorted(set(OPS) - SERVED))
def test_op_raises_the_one_message(name):
    args, _ = OPS[name]
    with pytest.raises(RuntimeError, match=_expect(f"mslk::{name}")):
        getattr(torch.ops.mslk, name)(*args)


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_fake_shapes(name):
    # opcheck would run the (raising) kernel; the fake is checked under FakeTensorMode instead.
    args, shapes = OPS[name]
    with FakeTensorMode() as mode:
        fargs = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        out = getattr(torch.ops.mslk, name)(*fargs)
    outs = out if isinstance(out, tuple) else (out,)
    assert [tuple(o.shape) for o in outs] == shapes


def test_conv_fake_keeps_channels_last_3d():
    act = _t(2, 16, 8, 9, 10, dtype=F8).contiguous(memory_format=torch.channels_last_3d)
    flt = _t(4, 16, 3, 3, 3, dtype=F8).contiguous(memory_format=torch.channels_last_3d)
    with FakeTensorMode() as mode:
        out = torch.ops.mslk.f8f8bf16_conv(mode.from_tensor(act), mode.from_tensor(flt),
                                           mode.from_tensor(_t(1, dtype=torch.float32)), [1, 1, 1], [1, 1, 1],
                                           [1, 1, 1])
    assert tuple(out.shape) == (2, 4, 8, 9, 10) and out.dtype == torch.bfloat16
    assert out.is_contiguous(memory_format=torch.channels_last_3d)


def test_ops_compile_to_the_same_error():
    fn = torch.compile(lambda x, w, s: torch.ops.mslk.f4f4bf16(x, w, s, s), backend="eager", fullgraph=True)
    with pytest.raises(RuntimeError, match="mslk::f4f4bf16: not available on this platform: "):
        fn(_X4, _W4, _S)


# --- the spec surface -------------------------------------------------------------------------

# Groups whose every symbol must exist (stubs or real), and the symbols of partly stubbed groups.
COMPLETE_GROUPS = [
    "Attention - ROCm MLA", "Attention - FlyDSL Flash Attention", "Attention - Standalone Blackwell FMHA",
    "Attention - Raw Blackwell torch ops", "Attention - Raw backend ops", "GEMM - FP4 & microscaling torch ops",
    "GEMM - Blackwell mixed-input CuTeDSL", "Quantization - MXFP4 quantization",
    "Quantization - NVFP4 & legacy FP4", "Quantization - FP4 constants & primitives",
    "Quantization - MXFP6 helpers", "Convolution - FP8 3D convolution", "Runtime - FlyDSL runtime & AOT",
]
PARTIAL = {
    "GEMM - Triton FP8 GEMM": {"to_mxfp8"},
    "GEMM - Triton groupwise & microscaling": {"matmul_mx8mx4bf16", "matmul_mx8mx4bf16_grouped",
                                               "matmul_mx8mx8bf16_grouped", "mxfp4_gemm", "mxfp4_grouped_mm",
                                               "mxfp4_grouped_stacked_gemm", "f4f4bf16"},
}


@pytest.fixture(scope="module")
def surface(tmp_path_factory):
    if not SURFACE_TOOL.exists():
        pytest.skip(f"{SURFACE_TOOL} is absent")
    out = tmp_path_factory.mktemp("surface") / "rows.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, str(SURFACE_TOOL), "--root", str(REPO), "--json", str(out)], env=env,
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(out.read_text())


def test_surface_has_no_signature_mismatch(surface):
    assert [r for r in surface if r["status"] == "mismatch"] == []


def test_surface_groups_complete(surface):
    groups = {r["group"] for r in surface}
    for g in COMPLETE_GROUPS:
        assert g in groups, g
        missing = [r["name"] for r in surface if r["group"] == g and r["status"] != "present"]
        assert missing == [], (g, missing)
    for g, names in PARTIAL.items():
        got = {r["name"] for r in surface if r["group"] == g and r["status"] == "present"}
        assert names <= got, (g, names - got)


def test_stub_signatures_match_the_spec(surface):
    # The tool checks presence only for Python symbols: compare the stubs' argument names here.
    sys.path.insert(0, str(SURFACE_TOOL.parent))
    try:
        import spec_surface
    finally:
        sys.path.pop(0)
    checked = 0
    for s in spec_surface.parse_spec(spec_surface.SPEC):
        if s["module"] not in STUB_MODULES:
            continue
        fn = getattr(importlib.import_module(s["module"]), s["name"], None)
        code = s["code"].strip()
        if not getattr(fn, "__mslk_unavailable__", None) or not code.startswith(s["name"] + "("):
            continue
        want = spec_surface.arg_names(code)
        got = [p.name for p in inspect.signature(fn).parameters.values() if p.kind != p.VAR_KEYWORD]
        assert got == want, (s["module"], s["name"], got, want)
        checked += 1
    assert checked >= 41  # (the Blackwell decode facade is served: test_blackwell_decode.py checks its signature)
