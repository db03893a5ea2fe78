// The run-table side of the CUTLASS dispatchers (bf16_grouped_cutlass_dispatch.cu,
// bf16_wgrad_dispatch.cu, fp8_grouped_dispatch.cu, fp8_rowwise_dispatch.cu): a forced row or the
// heuristic's, and the call through the table of generated instantiations.
#pragma once
#include <cuda_runtime_api.h>

#include "gemm/kernels/config_table.h"

// X-macro helpers over a config table's rows (CONFIGS(X) calls X(id, ...)), for a dispatcher that
// defines MSLK_ROW_FN (the family's template <int ID> entry) and MSLK_ROW_PARAMS first:
//   CONFIGS(MSLK_DECLARE_ROW)                          declares every row's instantiation;
//   RowRunFn<P> kRun[] = {CONFIGS(MSLK_RUN_ENTRY)}  the run table, indexed by row id;
//   int kIds[] = {CONFIGS(MSLK_ROW_ID)}                 the ids, for ids_in_order.
#define MSLK_DECLARE_ROW(id, ...) \
  template <>                     \
  cudaError_t MSLK_ROW_FN<id>(const MSLK_ROW_PARAMS&, cudaStream_t);
#define MSLK_RUN_ENTRY(id, ...) &MSLK_ROW_FN<id>,
#define MSLK_ROW_ID(id, ...) id,

namespace mslk::gemm {

template <class Params>
using RowRunFn = cudaError_t (*)(const Params&, cudaStream_t);

// The forced row (GemmTuning::forced_row >= 0) in the call's accumulation mode, else `heuristic`;
// -1 when a forced row has no counterpart in that mode (the glue validated the id).
template <int N>
constexpr int pick_row(const TileConfig (&t)[N], int forced, bool fast, int heuristic) {
  return forced >= 0 ? forced_row_in_mode(t, forced, fast) : heuristic;
}

// Runs row `row` of the run table; cudaErrorNotSupported (nothing launched) when there is none.
template <class Params, int N>
cudaError_t run_row(const RowRunFn<Params> (&run)[N], int row, const Params& p, cudaStream_t stream) {
  if (row < 0 || row >= N) return cudaErrorNotSupported;
  return run[row](p, stream);
}

}  // namespace mslk::gemm
