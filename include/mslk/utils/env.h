// The environment variables the C++ library reads, and the one reader of them (the only
// std::getenv in the library). Each variable is a row of MSLK_ENV_VARS; a reader takes the row's
// id, so an unlisted name cannot be read. Readers run in the torch glue (and in the public tuning
// cache), never inside the kernel layer: the glue turns the values into plain tuning structs.
// A malformed value throws std::invalid_argument naming the variable, what it accepts and what it
// got; unset and empty mean "use the default". README's table of variables is checked against
// this list (test/runtime/test_env_vars.py). Plain C++: no torch, no CUDA headers.
#pragma once
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>

namespace mslk::env {

// X(id, NAME, accepted values, default, meaning)
#define MSLK_ENV_VARS(X)                                                                                           \
  X(kCacheDir, MSLK_CACHE_DIR, "a folder", "$HOME/.mslk", "cache folder of the tuning cache")                      \
  X(kHome, HOME, "a folder", "", "where MSLK_CACHE_DIR defaults to")                                               \
  X(kAutotuneUseCudaGraph, MSLK_AUTOTUNE_USE_CUDA_GRAPH, "presence", "off",                                        \
    "benchmark autotune candidates in CUDA graphs")                                                                \
  X(kAutotuneCollectStats, MSLK_AUTOTUNE_COLLECT_STATS, "presence", "off",                                         \
    "collect timing statistics while autotuning")                                                                  \
  X(kFmhaKernel, MSLK_FMHA_KERNEL, "auto, sm80, sm90", "auto",                                                     \
    "fused attention forward kernel: the Hopper kernel where it applies (paged K/V and tensor biases included), "  \
    "else FA2 (auto); always FA2 (sm80); the Hopper kernel or an error (sm90)")                                    \
  X(kFmhaSm90Cfg, MSLK_FMHA_SM90_CFG, "a row of kTileCfgs", "by head dim",                                         \
    "tuning: run the Hopper attention kernel with that row of fmha_fwd_sm90_configs.h for problems of its head "   \
    "dim")                                                                                                         \
  X(kFmhaSm90L2Mib, MSLK_FMHA_SM90_L2_MIB, "0 to 4096", "16",                                                      \
    "tuning: K/V MiB per L2 section of the Hopper attention kernel's work order (0: one section)")                 \
  X(kFmhaSm90StreamK, MSLK_FMHA_SM90_STREAMK, "0, 1", "by a waste threshold",                                      \
    "tuning: stream-K split of the Hopper attention kernel's idle SMs: never (0), whenever SMs would idle (1)")    \
  X(kFmhaSm90Otma, MSLK_FMHA_SM90_OTMA, "0, 1", "1",                                                               \
    "tuning: 0 writes the Hopper attention kernel's O from registers instead of TMA stores")                       \
  X(kFmhaSm90Ovec, MSLK_FMHA_SM90_OVEC, "0, 1", "1",                                                               \
    "tuning: 0 writes the Hopper attention kernel's O in 4-byte stores instead of 16-byte ones")                   \
  X(kFmhaSm90BiasTma, MSLK_FMHA_SM90_BIAS_TMA, "0, 1", "1",                                                      \
    "tuning: 0 has each thread of the Hopper attention kernel load its scores' tensor bias instead of TMA "       \
    "tiles of it in shared memory")                                                                                \
  X(kFmhaBwdSm90Dq, MSLK_FMHA_BWD_SM90_DQ, "atomic, tiles", "tiles",                                              \
    "dQ sums of the Hopper attention backward: 8-byte atomics from the consumer warps (atomic), or one bulk "      \
    "reduction a tile and warpgroup into tile-contiguous sums (tiles)")                                           \
  X(kFmhaBwdSm90D256, MSLK_FMHA_BWD_SM90_D256, "0, 1", "1",                                                       \
    "head dim 256 (fp16 / bf16, no dropout or bias) of the attention backward on the Hopper kernel (1) or the "    \
    "FA2-style kernel (0)")                                                                                        \
  X(kDecodeTileCfg, MSLK_DECODE_TILE_CFG, "0 to 3", "by head dim",                                                 \
    "tuning: force the split-K decode attention kernel's tile row (fmha_decode_kernel.cuh, DecodeCfg)")            \
  X(kDecodeKvDequant, MSLK_DECODE_KV_DEQUANT, "auto, separate, fused, folded, registers", "auto",                 \
    "split-K decode over quantized (FP8 / INT4) K/V caches: raw values in fp16 MMAs with the rows' scale and "     \
    "shift applied to scores and probabilities (folded; FP8 and one-group INT4, auto's choice there), the same "   \
    "math with an FP8 cache copied straight into mma fragments (registers; head dims 64 and 128 with 16-byte "     \
    "rows, else folded), each tile "                                                                                \
    "dequantized to the query dtype inside the kernel (fused; auto for other INT4 where the head dim allows), "    \
    "or the cache into a temporary, then the decode kernel (separate; the same bits as fused)")                   \
  X(kFp8Schedule, MSLK_FP8_SCHEDULE,                                                                               \
    "auto, oneshot, staged, cluster, bulk, warp, hybrid-persistent, ring", "auto",                                 \
    "FP8 quantizer kernel schedule (benchmarking switch)")                                                         \
  X(kFp8RowTeam, MSLK_FP8_ROW_TEAM, "1, 2, 4", "by row size", "FP8 row quantizer: warps a row (tuning)")           \
  X(kFp8GemmKernel, MSLK_FP8_GEMM_KERNEL, "auto, skinny, cutlass, simt", "auto",                                   \
    "rowwise FP8 GEMM kernel; a forced kernel that cannot take the problem raises")                                \
  X(kFp8RowwiseTile, MSLK_FP8_ROWWISE_TILE, "a row of fp8_rowwise_configs.h", "by shape bucket",                   \
    "tuning: force a CUTLASS rowwise row (with MSLK_FP8_GEMM_KERNEL=cutlass)")                                     \
  X(kFp8GroupedKernel, MSLK_FP8_GROUPED_KERNEL, "auto, host", "auto",                                              \
    "FP8 grouped GEMMs along M (rowwise and groupwise): host runs one GEMM a group with the sizes read to the "    \
    "host (for comparison)")                                                                                       \
  X(kFp8GroupedConfig, MSLK_FP8_GROUPED_CONFIG, "a row of fp8_grouped_configs.h", "by average group size",         \
    "tuning: force a row of the CUTLASS FP8 grouped GEMM")                                                         \
  X(kFp8BlockwiseConfig, MSLK_FP8_BLOCKWISE_CONFIG, "a row of fp8_blockwise_configs.h", "by shape",                \
    "tuning: force a row of the CUTLASS block/group-scaled FP8 GEMM")                                              \
  X(kFp8BlockwiseGroupedConfig, MSLK_FP8_BLOCKWISE_GROUPED_CONFIG, "a row of fp8_blockwise_grouped_configs.h",     \
    "by average group size",                                                                                       \
    "tuning: force a row of the grouped block/group-scaled FP8 GEMM (the CUTLASS rows, then mslk's wgmma kernel)") \
  X(kBf16GroupedKernel, MSLK_BF16_GROUPED_KERNEL, "auto, cutlass, simt", "auto",                                   \
    "BF16 grouped GEMMs: CUTLASS where TMA's rules hold, else SIMT (auto, cutlass); always SIMT (simt)")           \
  X(kBf16GroupedConfig, MSLK_BF16_GROUPED_CONFIG, "a row of bf16_grouped_configs.h", "by average group size",      \
    "tuning: force a row of the CUTLASS BF16 grouped forward / dgrad")                                             \
  X(kBf16WgradConfig, MSLK_BF16_WGRAD_CONFIG, "a row of bf16_wgrad_configs.h", "by output size",                   \
    "tuning: force a row of the CUTLASS BF16 grouped wgrad")                                                       \
  X(kGemmSwizzle, MSLK_GEMM_SWIZZLE, "1, 2, 4, 8", "by config row",                                                \
    "tuning: tile-scheduler swizzle of the CUTLASS GEMMs")                                                         \
  X(kGemmRaster, MSLK_GEMM_RASTER, "m, n", "by family",                                                            \
    "tuning: tile-scheduler walk of the CUTLASS FP8 grouped GEMMs (m: along M first, n: along N first)")          \
  X(kInt4Decode, MSLK_INT4_DECODE, "auto, tma, mma, fp32", "auto",                                                 \
    "INT4-weight GEMMs at M <= 16: the TMA-streaming tensor-core kernel (K a multiple of 128, a group of 128 or "  \
    "a multiple of 256, 16-byte aligned rows), the cp.async tensor-core one (K and the group multiples of 128), "  \
    "or the FP32 one; a forced kernel that cannot take the problem raises")                                        \
  X(kInt4DecodeSplits, MSLK_INT4_DECODE_SPLITS, "0 to 4096", "0 (by shape)",                                       \
    "tuning: force the K split of the INT4 decode kernels")                                                        \
  X(kFp8BlockwiseDecode, MSLK_FP8_BLOCKWISE_DECODE, "auto, on, off", "auto",                                       \
    "block/group-scaled FP8 GEMMs at M <= 16: the TMA-streaming decode kernel (auto, on) or the CUTLASS one "      \
    "(off); on where the decode kernel cannot take the problem raises")                                            \
  X(kFp8BlockwiseDecodeSplits, MSLK_FP8_BLOCKWISE_DECODE_SPLITS, "0 to 65535", "0 (by shape)",                     \
    "tuning: force the K split of the block/group-scaled FP8 decode kernel")                                      \
  X(kBf16x9Kernel, MSLK_BF16X9_KERNEL, "auto, fused, parts, fma", "auto",                                         \
    "bf16x9_gemm: float32 FMAs streaming B (fma), the kernel that splits the float32 operands itself (fused), "  \
    "both needing K and the row strides multiples of 4 and 16-byte aligned operands, or the BF16 parts buffers " \
    "and one BF16 GEMM (parts); auto takes fma up to kBf16x9FmaMaxM rows (32) and fused up to "                 \
    "kBf16x9FusedMaxM (1024; kernels/bf16x9_configs.h) where they apply; a forced kernel that cannot take the " \
    "problem raises")                                                                                            \
  X(kBf16x9FmaConfig, MSLK_BF16X9_FMA_CONFIG, "a row of MSLK_BF16X9_FMA_CONFIGS", "by M",                       \
    "tuning: force the row (kernels/bf16x9_configs.h) of bf16x9_gemm's FMA kernel")

enum class Var : int {
#define MSLK_ENV_ID(id, name, values, fallback, meaning) id,
  MSLK_ENV_VARS(MSLK_ENV_ID)
#undef MSLK_ENV_ID
};

struct VarInfo {
  const char* name;
  const char* values;
  const char* fallback;
  const char* meaning;
};

inline constexpr VarInfo kVars[] = {
#define MSLK_ENV_INFO(id, name, values, fallback, meaning) VarInfo{#name, values, fallback, meaning},
    MSLK_ENV_VARS(MSLK_ENV_INFO)
#undef MSLK_ENV_INFO
};

inline constexpr const char* name(Var v) { return kVars[static_cast<int>(v)].name; }

// The raw value; nullptr when unset or empty.
inline const char* raw(Var v) {
  const char* s = std::getenv(name(v));
  return s != nullptr && *s != '\0' ? s : nullptr;
}

// Set at all, even to "" or "0" (the spec's presence-based switches).
inline bool present(Var v) { return std::getenv(name(v)) != nullptr; }

[[noreturn]] inline void reject(Var v, const char* got, const std::string& expected) {
  throw std::invalid_argument(std::string(name(v)) + " must be " + expected + " (or unset), got '" + got + "'");
}

// A whole number in [lo, hi]; fallback when unset.
inline long long integer(Var v, long long fallback, long long lo, long long hi) {
  const char* s = raw(v);
  if (s == nullptr) return fallback;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || x < lo || x > hi)
    reject(v, s, "a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
  return x;
}

// One of `names`: its index; fallback when unset.
inline int choice(Var v, std::initializer_list<const char*> names, int fallback) {
  const char* s = raw(v);
  if (s == nullptr) return fallback;
  int i = 0;
  std::string expected;
  for (const char* n : names) {
    if (std::strcmp(s, n) == 0) return i;
    expected += (i == 0 ? "" : i + 1 == static_cast<int>(names.size()) ? " or " : ", ");
    expected += n;
    ++i;
  }
  reject(v, s, expected);
}

// 0 or 1; fallback when unset.
inline bool flag(Var v, bool fallback) { return choice(v, {"0", "1"}, fallback ? 1 : 0) == 1; }

// The value as text; fallback when unset or empty.
inline std::string text(Var v, const std::string& fallback) {
  const char* s = raw(v);
  return s != nullptr ? std::string(s) : fallback;
}

}  // namespace mslk::env
