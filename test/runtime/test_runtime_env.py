"""mslk.utils.env: runtime knobs, read at call time."""

import os

import pytest

from mslk.utils import env


def test_cache_dir_default_and_override(monkeypatch, tmp_path):
    monkeypatch.delenv("MSLK_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert env.cache_dir() == os.path.join(str(tmp_path), ".mslk")
    monkeypatch.setenv("MSLK_CACHE_DIR", "/somewhere/else")
    assert env.cache_dir() == "/somewhere/else"
    monkeypatch.setenv("MSLK_CACHE_DIR", "")
    assert env.cache_dir() == os.path.join(str(tmp_path), ".mslk")


@pytest.mark.parametrize("name, fn", [
    ("MSLK_AUTOTUNE_USE_CUDA_GRAPH", env.autotune_use_cuda_graph),
    ("MSLK_AUTOTUNE_COLLECT_STATS", env.autotune_collect_stats),
    ("MSLK_ROCM_FORCE_FP8FNUZ_TYPE", env.rocm_force_fp8_fnuz),
])
def test_presence_switches(monkeypatch, name, fn):
    monkeypatch.delenv(name, raising=False)
    assert fn() is False
    monkeypatch.setenv(name, "0")  # presence, not value, turns it on
    assert fn() is True


def test_flydsl_disable_jit(monkeypatch):
    monkeypatch.delenv("MSLK_FLYDSL_DISABLE_JIT", raising=False)
    assert not env.flydsl_disable_jit()
    monkeypatch.setenv("MSLK_FLYDSL_DISABLE_JIT", "0")
    assert not env.flydsl_disable_jit()
    monkeypatch.setenv("MSLK_FLYDSL_DISABLE_JIT", "1")
    assert env.flydsl_disable_jit()


def test_flydsl_aot_workers(monkeypatch):
    for value, want in (("4", 4), ("0", None), ("-2", None), ("x", None), ("", None)):
        monkeypatch.setenv("MSLK_FLYDSL_AOT_WORKERS", value)
        assert env.flydsl_aot_workers() == want
