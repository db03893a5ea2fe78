"""Package identity, Python-only mode, import hygiene and load_library_buck."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import mslk
from mslk import _native
from mslk.utils.torch import library

REPO = Path(__file__).resolve().parents[2]


def _run(code: str, **env_overrides) -> str:
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    env.update(env_overrides)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _libmslk_mapped() -> bool:
    return "libmslk.so" in Path("/proc/self/maps").read_text()


def test_version_is_real():
    version = pytest.importorskip("packaging.version")
    v = version.Version(mslk.__version__)  # raises on an unparseable version
    assert v > version.Version("0.0.0")


def test_identity():
    assert mslk.open_source is True
    assert isinstance(mslk.__target__, str) and mslk.__target__
    assert mslk.__variant__ in {"cuda", "cpu", "python-only"}
    if _native.python_only():
        assert mslk.__variant__ == "python-only"
    else:
        assert mslk.__variant__ in {"cuda", "cpu"}


@pytest.mark.skipif(_native.python_only() or not sys.platform.startswith("linux"),
                    reason="native mode on Linux")
def test_native_library_is_loaded():
    assert _libmslk_mapped()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/maps")
def test_python_only_mode_skips_the_native_library():
    code = ("import mslk, mslk._native as n, pathlib;"
            "print(mslk.__variant__, n._loaded,"
            " 'libmslk.so' in pathlib.Path('/proc/self/maps').read_text())")
    assert _run(code, MSLK_PYTHON_ONLY="1") == "python-only False False"


def test_runtime_modules_have_no_import_side_effects():
    # Importing the runtime surface must not initialise CUDA or touch the environment
    # (mslk.flydsl.jit is the spec'd exception: it sets FlyDSL's own variables).
    code = ("import os, torch; before = dict(os.environ);"
            "import mslk.utils.device, mslk.utils.env, mslk.testing, mslk.flydsl.common,"
            " mslk.flydsl.aot, mslk.utils.triton.fp8_utils, mslk.utils.torch.library;"
            "print(torch.cuda.is_initialized(), dict(os.environ) == before)")
    assert _run(code) == "False True"


def test_load_library_buck_is_noop_in_python_only_mode(monkeypatch):
    monkeypatch.setattr(_native, "python_only", lambda: True)
    monkeypatch.setattr(_native, "load", lambda: pytest.fail("must not load"))
    assert library.load_library_buck("//mslk/gemm:gemm_ops") is None


def test_load_library_buck_loads_the_one_library(monkeypatch):
    calls = []
    monkeypatch.setattr(_native, "python_only", lambda: False)
    monkeypatch.setattr(_native, "load", lambda: calls.append(1) or True)
    library.load_library_buck("//mslk/gemm:gemm_ops")
    library.load_library_buck("//mslk/quantize:quantize_ops")
    assert len(calls) == 2  # each call defers to _native.load, which loads only once


def test_load_library_buck_suppresses_oserror(monkeypatch):
    def fail():
        raise OSError("dlopen failed")

    monkeypatch.setattr(_native, "python_only", lambda: False)
    monkeypatch.setattr(_native, "load", fail)
    library.load_library_buck("//mslk/attention:attention_ops")


@pytest.mark.skipif(_native.python_only(), reason="needs the native library")
def test_load_library_buck_real():
    library.load_library_buck("//mslk:mslk")
    assert _native._loaded
