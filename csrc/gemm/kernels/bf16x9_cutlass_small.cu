// Row 1 of bf16x9_configs.h: bf16x9_gemm's BF16 GEMM on 64 x 128 ping-pong tiles, for problems
// whose large tiles would leave SMs idle (small M or N).
#if MSLK_HAS_CUTLASS
#include "gemm/kernels/bf16x9_cutlass.cuh"

MSLK_BF16X9_INSTANTIATE(1)
#endif
