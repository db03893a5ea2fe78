"""GEMM: FP8 rowwise products (torch.ops.mslk.f8f8bf16_rowwise family) and their wrappers."""
