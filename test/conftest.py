import os
import re

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

# MSLK_REQUIRE_GPU=1 (set by the GPU round, tools/gpu_test_file.sh): a run without a CUDA device
# stops at once, and a test that skips for want of a GPU fails instead (its skip reason names
# CUDA, a GPU or an sm_NN arch; compute-capability skips of other architectures stay skips).
_GPU_REASON = re.compile(r"\b(cuda|gpus?|sm_?\d+)\b", re.IGNORECASE)


def _require_gpu() -> bool:
    return os.environ.get("MSLK_REQUIRE_GPU") == "1"


def gpu_skip_failure(reason: str):
    """The failure message for a skip with this reason under MSLK_REQUIRE_GPU=1, else None."""
    if not _require_gpu() or not _GPU_REASON.search(reason) or "compute capability" in reason:
        return None
    return f"MSLK_REQUIRE_GPU=1: a GPU test skipped instead of running ({reason})"


def pytest_sessionstart(session):
    if _require_gpu() and not torch.cuda.is_available():
        raise pytest.UsageError("MSLK_REQUIRE_GPU=1 but torch sees no CUDA device")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if not rep.skipped or hasattr(rep, "wasxfail"):
        return
    reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
    msg = gpu_skip_failure(reason)
    if msg is not None:
        rep.outcome = "failed"
        rep.longrepr = msg


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
