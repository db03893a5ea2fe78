"""GEMMs the reference wrote in Triton; here thin wrappers over mslk's native ops."""
