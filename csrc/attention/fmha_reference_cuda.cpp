// CUDA registration of the reference attention forward (ATen ops only, so it is correct on CUDA;
// slow: it materializes the score matrix). The fused Hopper kernel replaces it for dispatch later.
#include <torch/library.h>

#include "attention/fmha_reference.h"

TORCH_LIBRARY_IMPL(mslk, CUDA, m) { m.impl("fmha_reference_fwd", &mslk::attention::fmha_reference_fwd); }
