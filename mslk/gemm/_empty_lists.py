"""The list-form grouped GEMM ops called with empty lists.

Without a tensor argument the dispatcher has no backend to pick and raises a generic
NotImplementedError. A CompositeExplicitAutograd kernel answers such calls (the CPU, CUDA and
Meta kernels still serve every call with tensors): the list forms return an empty list, the _cat
forms (one output tensor, with no device or dtype to take) raise the C++ checks' ValueError.
Registered after the fakes: torch refuses a fake for an op that already has a Meta kernel.
"""

import torch

_LIST_OPS = {  # op -> its list arguments, first one named in errors
    "bf16bf16bf16_grouped": ("X", "W"),
    "bf16bf16bf16_grouped_cat": ("X", "W"),
    "f8f8bf16_rowwise_grouped": ("XQ", "WQ", "x_scale", "w_scale"),
    "f8f8bf16_rowwise_grouped_cat": ("XQ", "WQ", "x_scale", "w_scale"),
}


def _no_tensor_kernel(op: str, names):
    def kernel(*lists):
        if any(len(x) for x in lists):  # tensors on a device that has no kernel of this op
            dev = next(t.device for x in lists for t in x)
            raise NotImplementedError(f"{op}: no kernel for device '{dev}' (CPU and CUDA have one)")
        if op.endswith("_cat"):
            raise ValueError(f"{op}: argument '{names[0]}' (and '{names[1]}') must hold at least one group, "
                             "got empty lists")
        return []

    return kernel


for _op, _names in _LIST_OPS.items():
    torch.library.impl(f"mslk::{_op}", "CompositeExplicitAutograd")(_no_tensor_kernel(_op, _names))
