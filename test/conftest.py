import os

import pytest
import torch
import torch._functorch.config

import mslk  # noqa: F401  (loads the native library: registers every op)

# A custom op that returns an alias of an input breaks torch.compile: torch raises from 2.12 (and
# under CI=1 before), warns otherwise. Make it an error in every test, whatever the environment.
if hasattr(torch._functorch.config, "error_on_custom_op_aliasing"):
    torch._functorch.config.error_on_custom_op_aliasing = True

HAS_CUDA = torch.cuda.is_available()
DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])

# On the GPU machine the round script sets MSLK_REQUIRE_GPU=1: a GPU test that would skip
# there is a failure, not a pass.
if os.environ.get("MSLK_REQUIRE_GPU") == "1" and not HAS_CUDA:
    raise RuntimeError("MSLK_REQUIRE_GPU=1 but torch sees no CUDA device")


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# MSLK_TEST_TIMEOUT=N (the GPU round sets it): a test running longer than N seconds (a hung
# kernel, a grid barrier that never completes) dumps every thread's traceback and ends the
# process, instead of eating the whole device call. (pytest-timeout is not on the GPU machine.)
# The test id and the traceback go to MSLK_WATCHDOG_FILE (default stderr), outside pytest's capture.
_TIMEOUT = float(os.environ.get("MSLK_TEST_TIMEOUT", "0") or 0)
_WATCH = open(os.environ["MSLK_WATCHDOG_FILE"], "a") if _TIMEOUT > 0 and os.environ.get("MSLK_WATCHDOG_FILE") else None


@pytest.fixture(autouse=True)
def _watchdog(request):
    if _TIMEOUT <= 0:
        yield
        return
    import faulthandler
    import sys

    out = _WATCH or sys.__stderr__
    print(f"[watchdog] {request.node.nodeid}", file=out, flush=True)
    faulthandler.dump_traceback_later(_TIMEOUT, exit=True, file=out)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
