"""MXFP4 quantization kernels (raise in this build: no FP4 / MX kernels yet)."""
