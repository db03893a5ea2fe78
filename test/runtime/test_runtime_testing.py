"""mslk.testing skip decorators, under unittest and pytest, on faked and real devices."""

import os
import subprocess
import sys
import textwrap
import unittest
from pathlib import Path

import pytest

import mslk.testing
from mslk.testing import device as td
from mslk.utils.device import is_rocm

REPO = Path(__file__).resolve().parents[2]


def _func():
    return "ran"


def _skipped(item) -> bool:
    return bool(getattr(item, "__unittest_skip__", False)) or any(
        m.name == "skip" for m in getattr(item, "pytestmark", [])
    )


def _check(decorator, expect_skip: bool):
    out = decorator(_func)
    if expect_skip:
        assert _skipped(out)
        with pytest.raises(unittest.SkipTest):
            out()
    else:
        assert out is _func  # running tests are left untouched


def test_reexported_from_package():
    for name in ("skipUnlessCuda", "skipUnlessRocm", "skipUnlessCudaCapability",
                 "skipUnlessCudaVersion", "skipUnlessGfxArch"):
        assert getattr(mslk.testing, name) is getattr(td, name)


def test_no_gpu_skips_everything_device_bound(fake_devices):
    fake_devices.set("none", cuda=None)
    _check(td.skipUnlessCuda(), True)
    _check(td.skipUnlessRocm(), True)
    _check(td.skipUnlessCudaCapability(0), True)
    _check(td.skipUnlessCudaVersion(1), True)
    _check(td.skipUnlessGfxArch("gfx942"), True)


def test_on_fake_sm90(fake_devices):
    fake_devices.set("cuda", caps=[(9, 0)], cuda="13.0")
    _check(td.skipUnlessCuda(), False)
    _check(td.skipUnlessRocm(), True)
    _check(td.skipUnlessCudaCapability(9), False)
    _check(td.skipUnlessCudaCapability(8, 9), False)
    _check(td.skipUnlessCudaCapability(9, minor_min=1), True)
    _check(td.skipUnlessCudaCapability(10), True)
    _check(td.skipUnlessCudaCapability(10, 12), True)
    _check(td.skipUnlessCudaCapability(7, 8), True)
    _check(td.skipUnlessCudaVersion(13), False)
    _check(td.skipUnlessCudaVersion(14), True)
    _check(td.skipUnlessGfxArch("gfx942"), False)  # transparent on CUDA


def test_on_fake_gfx942(fake_devices):
    fake_devices.set("rocm", caps=[(9, 4)], archs=["gfx942:sramecc+:xnack-"])
    _check(td.skipUnlessCuda(), True)
    _check(td.skipUnlessRocm(), False)
    _check(td.skipUnlessCudaCapability(100), False)  # transparent on ROCm
    _check(td.skipUnlessCudaVersion(99), False)
    _check(td.skipUnlessGfxArch("gfx942"), False)
    _check(td.skipUnlessGfxArch("gfx950", "gfx942"), False)
    _check(td.skipUnlessGfxArch("gfx950"), True)


def test_unittest_runner_skips_testcase_class_and_method(fake_devices):
    fake_devices.set("none")

    @td.skipUnlessCuda()
    class WholeClass(unittest.TestCase):
        def test_a(self):
            raise AssertionError("must not run")

    class OneMethod(unittest.TestCase):
        @td.skipUnlessGfxArch("gfx942")
        def test_b(self):
            raise AssertionError("must not run")

        def test_c(self):
            pass

    suite = unittest.TestSuite()
    for case in (WholeClass, OneMethod):
        suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(case))
    result = unittest.TestResult()
    suite.run(result)
    assert result.testsRun == 3 and not result.failures and not result.errors
    assert len(result.skipped) == 2


@pytest.mark.skipif(is_rocm(), reason="the generated file expects skipUnlessRocm to skip")
def test_pytest_functions_and_classes_skip_before_fixtures(tmp_path):
    # A real pytest run: plain functions, plain classes and TestCases are all skipped, and a
    # fixture that cannot work on this machine is never set up.
    (tmp_path / "test_gen.py").write_text(textwrap.dedent("""
        import unittest
        import pytest
        from mslk.testing import skipUnlessRocm

        @pytest.fixture
        def gpu_only():
            raise RuntimeError("fixture must not run")

        @skipUnlessRocm()
        def test_function(gpu_only):
            raise AssertionError

        @skipUnlessRocm()
        class TestPlain:
            def test_method(self, gpu_only):
                raise AssertionError

        @skipUnlessRocm()
        class TestCaseClass(unittest.TestCase):
            def test_method(self):
                raise AssertionError

        class TestMixed(unittest.TestCase):
            @skipUnlessRocm()
            def test_skipped(self):
                raise AssertionError

            def test_runs(self):
                pass
    """))
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed, 4 skipped" in proc.stdout, proc.stdout
