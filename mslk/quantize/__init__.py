"""Quantization: FP8 (row, block, group, tensor) quantizers and their dequantizers."""
