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

# MSLK_REQUIRE_GPU=N (N >= 1; the GPU round sets 1, and 2 on two-GPU machines) promises N CUDA
# devices: a run that sees fewer stops at once, and a test that skips for want of a GPU fails
# instead (its skip reason names CUDA, a GPU or an sm_NN arch; compute-capability skips of other
# architectures stay skips). A requires_gpus(n) skip fails only where the machine could run it:
# n <= N, or n <= the devices torch sees; elsewhere it stays a skip.
_GPU_REASON = re.compile(r"\b(cuda|gpus?|sm_?\d+)\b", re.IGNORECASE)
_GPUS_REASON = re.compile(r"\bneeds (\d+) CUDA GPUs\b")


def _required_gpus() -> int:
    """The number of CUDA devices MSLK_REQUIRE_GPU promises (0: unset or not a number)."""
    v = os.environ.get("MSLK_REQUIRE_GPU", "")
    return int(v) if v.isdigit() else 0


def _require_gpu() -> bool:
    return _required_gpus() >= 1


def requires_gpus(n: int):
    """Skip unless torch sees at least n CUDA devices."""
    k = torch.cuda.device_count()
    return pytest.mark.skipif(k < n, reason=f"needs {n} CUDA GPUs, this machine has {k}")


def gpu_skip_failure(reason: str):
    """The failure message for a skip with this reason under MSLK_REQUIRE_GPU, else None."""
    level = _required_gpus()
    if level < 1 or not _GPU_REASON.search(reason) or "compute capability" in reason:
        return None
    many = _GPUS_REASON.search(reason)
    if many and int(many.group(1)) > max(level, torch.cuda.device_count()):
        return None  # more GPUs than promised and than present: it cannot run here
    return f"MSLK_REQUIRE_GPU={level}: a GPU test skipped instead of running ({reason})"


def pytest_sessionstart(session):
    level = _required_gpus()
    if level < 1:
        return
    if not torch.cuda.is_available():
        raise pytest.UsageError(f"MSLK_REQUIRE_GPU={level} but torch sees no CUDA device")
    if torch.cuda.device_count() < level:
        raise pytest.UsageError(f"MSLK_REQUIRE_GPU={level} but torch sees only {torch.cuda.device_count()} "
                                "CUDA device(s)")


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
