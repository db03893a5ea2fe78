"""mslk.flydsl: the names exist and say honestly that FlyDSL cannot run in this build."""

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

import mslk.flydsl
from mslk.flydsl import aot, common, jit

REPO = Path(__file__).resolve().parents[2]
UNAVAILABLE = r"not available on this platform: FlyDSL is AMD ROCm only"


def test_package_init_is_empty():
    # Callers import mslk.flydsl.common / jit / aot explicitly.
    assert Path(mslk.flydsl.__file__).read_text().strip() == ""


def test_is_flydsl_available_is_false_and_cached():
    common.is_flydsl_available.cache_clear()
    assert common.is_flydsl_available() is False
    assert common.is_flydsl_available() is False
    assert common.is_flydsl_available.cache_info().hits >= 1
    common.is_flydsl_available.cache_clear()
    assert common.is_flydsl_available.cache_info().currsize == 0


def test_require_flydsl_raises_clearly():
    with pytest.raises(RuntimeError, match=UNAVAILABLE):
        common.require_flydsl()


def test_run_compiled_raises_without_launching():
    calls = []
    with pytest.raises(RuntimeError, match=UNAVAILABLE):
        jit.run_compiled(lambda *a: calls.append(a), 1, 2)
    assert calls == []


def test_configure_runtime_cache_disable_jit(monkeypatch):
    monkeypatch.delenv("FLYDSL_RUNTIME_RUN_ONLY", raising=False)
    monkeypatch.delenv("MSLK_FLYDSL_DISABLE_JIT", raising=False)
    jit.configure_runtime_cache()
    assert "FLYDSL_RUNTIME_RUN_ONLY" not in os.environ
    monkeypatch.setenv("MSLK_FLYDSL_DISABLE_JIT", "1")
    jit.configure_runtime_cache()
    assert os.environ["FLYDSL_RUNTIME_RUN_ONLY"] == "1"


def test_configure_runtime_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("FLYDSL_RUNTIME_CACHE_DIR", raising=False)
    monkeypatch.setattr(jit, "AOT_ARTIFACTS_DIR", tmp_path / "missing")
    jit.configure_runtime_cache()
    assert "FLYDSL_RUNTIME_CACHE_DIR" not in os.environ  # no bundled artifacts: leave unset
    monkeypatch.setattr(jit, "AOT_ARTIFACTS_DIR", tmp_path)
    jit.configure_runtime_cache()
    assert os.environ["FLYDSL_RUNTIME_CACHE_DIR"] == str(tmp_path)
    monkeypatch.setenv("FLYDSL_RUNTIME_CACHE_DIR", "/user/choice")
    jit.configure_runtime_cache()
    assert os.environ["FLYDSL_RUNTIME_CACHE_DIR"] == "/user/choice"  # the user's setting wins


def test_importing_jit_configures_the_cache():
    env = dict(os.environ, MSLK_FLYDSL_DISABLE_JIT="1",
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    env.pop("FLYDSL_RUNTIME_RUN_ONLY", None)
    code = "import os, mslk.flydsl.jit; print(os.environ.get('FLYDSL_RUNTIME_RUN_ONLY'))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"


def test_collect_aot_jobs_empty_registry():
    assert aot.collect_aot_jobs() == []


def test_collect_aot_jobs_is_configs_times_archs(monkeypatch):
    mod = types.ModuleType("fake_flydsl_kernels")
    mod.AOT_CONFIGS = [("gemm", {"tile": 128}), ("attn", {"d": 64})]
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    monkeypatch.setattr(aot, "_AOT_KERNEL_MODULES", [mod.__name__])
    jobs = aot.collect_aot_jobs()
    assert len(jobs) == 2 * len(aot._AOT_ARCHS)
    assert ("gemm", {"tile": 128}, "gfx942") in jobs and ("attn", {"d": 64}, "gfx950") in jobs


def test_compile_aot_with_no_kernels(tmp_path, capsys):
    assert aot.compile_aot(str(tmp_path)) is None
    assert "no FlyDSL kernels" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_compile_aot_with_kernels_needs_flydsl(tmp_path, monkeypatch):
    monkeypatch.setattr(aot, "collect_aot_jobs", lambda: [("k", {}, "gfx942")])
    with pytest.raises(RuntimeError, match=UNAVAILABLE):
        aot.compile_aot(str(tmp_path))


def test_aot_worker_count(monkeypatch):
    monkeypatch.setenv("MSLK_FLYDSL_AOT_WORKERS", "3")
    assert aot.default_workers() == 3
    monkeypatch.setenv("MSLK_FLYDSL_AOT_WORKERS", "bogus")
    assert 1 <= aot.default_workers() <= 32
    monkeypatch.delenv("MSLK_FLYDSL_AOT_WORKERS")
    assert 1 <= aot.default_workers() <= 32
