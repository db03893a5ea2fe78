// Row 1 of int8_gemm_configs.h, the swapped INT8 GEMM for decode-sized M (M <= kInt8SwapMaxM):
// out^T [N, M] = W X^T with a 64 x 16 x 128 ping-pong tile, so the weight rows fill the 64-row MMA
// side and the few tokens the 16-wide one; D is column-major, i.e. out itself.
#if MSLK_HAS_CUTLASS
#include "gemm/kernels/int8_gemm_cutlass.cuh"

MSLK_INT8_GEMM_INSTANTIATE(1)
#endif
