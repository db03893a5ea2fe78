"""MSLK_REQUIRE_GPU=N (test/conftest.py): GPU-test skips become failures naming the skip reason,
other skips stay skips, and a run that sees fewer than N CUDA devices stops at once. A
requires_gpus(n) skip fails only where it could run (n <= N or n <= the devices present). The
subprocess cases run pytest on a generated file, so they behave the same on CPU-only and GPU
machines; the rule itself is also checked in-process against a patched device count."""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from test import conftest

REPO = Path(__file__).resolve().parents[2]

GENERATED = '''
import pytest

@pytest.mark.skipif(True, reason="needs a CUDA device")
def test_marked_gpu():
    pass

def test_skipped_in_body():
    pytest.skip("needs an sm_90 GPU")

@pytest.mark.skipif(True, reason="needs Triton")
def test_other_reason():
    pass

@pytest.mark.skipif(True, reason="requires CUDA compute capability 10.0")
def test_other_arch():
    pass

@pytest.mark.xfail(reason="a GPU bug", strict=False)
def test_xfail():
    raise AssertionError

def test_plain():
    pass
'''


def _run(tmp_path, require, hide_devices=False, conftest=True, source=GENERATED):
    (tmp_path / "test_gen.py").write_text(textwrap.dedent(source))
    if conftest:  # the repository's hooks, nothing else of its conftest
        (tmp_path / "conftest.py").write_text(
            "from test.conftest import pytest_runtest_makereport, pytest_sessionstart  # noqa: F401\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    env.pop("MSLK_REQUIRE_GPU", None)
    if require:
        env["MSLK_REQUIRE_GPU"] = "1" if require is True else str(require)
    if hide_devices:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def _require_gpu_on_this_machine():
    import torch

    return torch.cuda.is_available()


def test_without_the_variable_skips_stay_skips(tmp_path):
    proc = _run(tmp_path, require=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed, 4 skipped, 1 xfailed" in proc.stdout, proc.stdout


def test_gpu_skips_fail_with_their_reason(tmp_path):
    if not _require_gpu_on_this_machine():
        # No device: the session itself must refuse to run (see the next test); the per-test
        # rule is checked through the hook with the session check left out.
        (tmp_path / "conftest.py").write_text(
            "from test.conftest import pytest_runtest_makereport  # noqa: F401\n")
        proc = _run(tmp_path, require=True, conftest=False)
    else:
        proc = _run(tmp_path, require=True)
    out = proc.stdout
    assert proc.returncode != 0, out + proc.stderr
    assert "needs a CUDA device" in out and "needs an sm_90 GPU" in out, out
    assert out.count("MSLK_REQUIRE_GPU=1: a GPU test skipped") >= 2, out
    # skipif marks fail in setup (an error), pytest.skip in the body fails the call
    assert "1 failed, 1 passed, 2 skipped, 1 xfailed, 1 error" in out, out


def test_no_device_stops_the_run(tmp_path):
    proc = _run(tmp_path, require=True, hide_devices=True)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "MSLK_REQUIRE_GPU=1 but torch sees no CUDA device" in proc.stdout + proc.stderr


MULTI_GPU = '''
import pytest

from test.conftest import requires_gpus

@requires_gpus(64)
def test_needs_many():
    pass

@pytest.mark.skipif(True, reason="needs 2 CUDA GPUs, this machine has 1")
def test_needs_two():
    pass

@pytest.mark.skipif(True, reason="needs a CUDA device")
def test_needs_one():
    pass
'''


def _multi_gpu_run(tmp_path, require):
    # The per-test rule only (the session check would stop a run on a machine with fewer devices).
    (tmp_path / "conftest.py").write_text("from test.conftest import pytest_runtest_makereport  # noqa: F401\n")
    return _run(tmp_path, require=require, conftest=False, source=MULTI_GPU)


def test_requires_gpus_reason_names_the_counts():
    k = torch.cuda.device_count()
    mark = conftest.requires_gpus(k + 1)
    assert mark.args == (True,) and mark.kwargs["reason"] == f"needs {k + 1} CUDA GPUs, this machine has {k}"
    assert conftest.requires_gpus(k).args == (False,)


def test_multi_gpu_skips_without_the_variable(tmp_path):
    out = _multi_gpu_run(tmp_path, require=False).stdout
    assert "3 skipped" in out and "failed" not in out and "error" not in out, out


def test_one_gpu_promise_keeps_skips_that_need_more(tmp_path):
    proc = _multi_gpu_run(tmp_path, require=True)
    out = proc.stdout
    assert "needs 64 CUDA GPUs" not in out, out  # a skip, not a failure: no reason printed
    assert "MSLK_REQUIRE_GPU=1: a GPU test skipped instead of running (Skipped: needs a CUDA device)" in out, out
    if torch.cuda.device_count() < 2:
        assert "2 skipped, 1 error" in out, out
    else:  # two devices present: the two-GPU skip could have run
        assert "1 skipped, 2 errors" in out, out


def test_two_gpu_promise_fails_two_gpu_skips(tmp_path):
    out = _multi_gpu_run(tmp_path, require=2).stdout
    failed = "MSLK_REQUIRE_GPU=2: a GPU test skipped instead of running (Skipped: "
    assert failed + "needs 2 CUDA GPUs, this machine has 1)" in out, out
    assert failed + "needs a CUDA device)" in out, out
    assert "1 skipped, 2 errors" in out, out  # needs 64 stays a skip


@pytest.mark.parametrize("level,present,n,fails", [
    ("1", 0, 2, False), ("1", 1, 2, False), ("1", 2, 2, True), ("1", 2, 3, False),
    ("2", 0, 2, True), ("2", 1, 2, True), ("2", 1, 3, False), ("2", 4, 3, True), ("", 0, 2, False),
])
def test_multi_gpu_rule(monkeypatch, level, present, n, fails):
    monkeypatch.setenv("MSLK_REQUIRE_GPU", level)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: present)
    msg = conftest.gpu_skip_failure(f"needs {n} CUDA GPUs, this machine has {present}")
    assert (msg is not None) == fails, msg
    if fails:
        assert msg.startswith(f"MSLK_REQUIRE_GPU={level}: ")


@pytest.mark.parametrize("level,present,available,message", [
    ("2", 1, True, "MSLK_REQUIRE_GPU=2 but torch sees only 1 CUDA device(s)"),
    ("2", 0, False, "MSLK_REQUIRE_GPU=2 but torch sees no CUDA device"),
    ("1", 0, False, "MSLK_REQUIRE_GPU=1 but torch sees no CUDA device"),
    ("2", 2, True, None), ("1", 1, True, None), ("", 0, False, None), ("yes", 0, False, None),
])
def test_session_needs_the_promised_devices(monkeypatch, level, present, available, message):
    monkeypatch.setenv("MSLK_REQUIRE_GPU", level)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: present)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: available)
    if message is None:
        conftest.pytest_sessionstart(None)
    else:
        with pytest.raises(pytest.UsageError, match=re.escape(message)):
            conftest.pytest_sessionstart(None)
