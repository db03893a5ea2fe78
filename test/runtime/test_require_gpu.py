"""MSLK_REQUIRE_GPU=1 (test/conftest.py): GPU-test skips become failures naming the skip reason,
other skips stay skips, and a run that sees no CUDA device stops at once. Each case runs pytest
in a subprocess on a generated file, so it behaves the same on CPU-only and GPU machines."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

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


def _run(tmp_path, require, hide_devices=False, conftest=True):
    (tmp_path / "test_gen.py").write_text(textwrap.dedent(GENERATED))
    if conftest:  # the repository's hooks, nothing else of its conftest
        (tmp_path / "conftest.py").write_text(
            "from test.conftest import pytest_runtest_makereport, pytest_sessionstart  # noqa: F401\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    env.pop("MSLK_REQUIRE_GPU", None)
    if require:
        env["MSLK_REQUIRE_GPU"] = "1"
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
