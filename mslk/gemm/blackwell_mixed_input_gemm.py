"""Blackwell mixed-input CuTeDSL GEMM (spec group "GEMM - Blackwell mixed-input CuTeDSL").

CuTeDSL kernels for SM100 (a narrow INT4/INT8 operand against a wide BF16/FP16 one). This build
has no Blackwell kernels: the names exist with the spec's signatures and raise
(mslk.utils.unavailable).
"""

from __future__ import annotations

import torch

from mslk.utils.unavailable import CUTEDSL_SM100, unavailable


class MixedInputGemmKernel:
    """A configured mixed-input GEMM kernel; launching it raises in this build."""

    def __init__(self, scale_granularity_m, scale_granularity_k, acc_dtype, use_2cta_instrs, mma_tiler_mnk,
                 cluster_shape_mn, use_tma_store):
        self.scale_granularity_m = scale_granularity_m
        self.scale_granularity_k = scale_granularity_k
        self.acc_dtype = acc_dtype
        self.use_2cta_instrs = use_2cta_instrs
        self.mma_tiler_mnk = mma_tiler_mnk
        self.cluster_shape_mn = cluster_shape_mn
        self.use_tma_store = use_tma_store

    @unavailable(CUTEDSL_SM100)
    def __call__(self, a, a_scale, b, c, max_active_clusters, stream):
        """Launch the configured kernel."""

    @staticmethod
    def can_implement(*args, **kwargs) -> bool:
        """No configuration can run without an SM100 kernel."""
        return False


@unavailable(CUTEDSL_SM100)
def mixed_input_gemm(A, B, A_scale=None, C=None, scale_granularity_m=1, scale_granularity_k=128, acc_dtype=None,
                     mma_tiler_mnk=(128, 128, 128), cluster_shape_mn=(1, 1), use_2cta_instrs=False,
                     use_tma_store=False) -> torch.Tensor:
    """General frontend: narrow A (optionally block-scaled) x wide B."""


@unavailable(CUTEDSL_SM100)
def int4bf16bf16_gemm(A, B, A_scale, C=None, scale_granularity_m=1, scale_granularity_k=128, acc_dtype=None,
                      mma_tiler_mnk=(128, 128, 128), cluster_shape_mn=(1, 1), use_2cta_instrs=False,
                      use_tma_store=False) -> torch.Tensor:
    """INT4 A x BF16 B."""


@unavailable(CUTEDSL_SM100)
def int8bf16bf16_gemm(A, B, C=None, acc_dtype=None, mma_tiler_mnk=(128, 128, 128), cluster_shape_mn=(1, 1),
                      use_2cta_instrs=False, use_tma_store=False) -> torch.Tensor:
    """INT8 A x BF16 B."""


@unavailable(CUTEDSL_SM100)
def create_tensors(l, m, n, k, a_major, b_major, c_major, a_dtype, b_dtype, c_dtype, scale_granularity_m=0,  # noqa: E741
                   scale_granularity_k=0):
    """Benchmark/reference tensors and their CuTe layouts."""


@unavailable(CUTEDSL_SM100)
def compare(a_torch_cpu, b_torch_cpu, a_scale_torch_cpu, c_torch_gpu, c_dtype, tolerance) -> None:
    """Check a kernel output against the CPU reference."""


@unavailable(CUTEDSL_SM100)
def run(mnkl, scale_granularity_m, scale_granularity_k, a_dtype, b_dtype, c_dtype, acc_dtype, a_major, b_major,
        c_major, mma_tiler_mnk, cluster_shape_mn, use_2cta_instrs, use_tma_store, tolerance, warmup_iterations=0,
        iterations=1, skip_ref_check=False, use_cold_l2=False, **kwargs):
    """Benchmark / validation driver."""
