"""The reference library's wheel (mslk-cuda 1.1.0) as a black-box peer of bench_moe_layers.py:
builds the same MoE layer configurations through its public API (MoEArgs, BaselineMoE /
MetaShufflingMoE, build(init_methods), forward(x, use_static_shape)), times them the same way
(bench/common.py's time_ms and time_graph_ms, layer_setup.py's profiler kernel sum) and writes
JSON for bench_moe_layers.py --ref-json.

Run it in its own process with the unpacked wheel first on the path and NOT the repository:

    pip install --no-deps --target DIR mslk_cuda-1.1.0-*.whl   (plus its import deps, see
                                                                ref_wheel_moe_layers.sh)
    PYTHONPATH=DIR python3 bench/moe/ref_wheel_moe_layers.py --wheel-dir DIR --out ref.json

It aborts unless `mslk` comes from DIR. Each layer configuration runs in its own try/except: a
failure is recorded in the JSON as its error text. The weights come from init methods that fill
each tensor they are handed (any key; layer_setup.RecordingInit); for FP8 the runner tries, in
order, the fill alone with precision "fp8_rowwise", then init methods returning (FP8 weights,
row scales), then returning ScaledParameter(weights, scales), and keeps the first that builds a
layer reporting FP8 routed weights.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def _scrub_sys_path() -> None:
    """Drop the repository (and this folder) from sys.path: `import mslk` must find the wheel."""
    bad = {REPO, HERE}
    sys.path[:] = [p for p in sys.path if Path(p or os.getcwd()).resolve() not in bad]


_scrub_sys_path()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def _load(name: str, path: Path):
    """A torch-only helper module of this repository, loaded by file (not through the package)."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up here
    spec.loader.exec_module(mod)
    return mod


common = _load("_mslk_bench_common", REPO / "bench" / "common.py")
S = _load("_mslk_bench_layer_setup", HERE / "layer_setup.py")


def say(msg: str) -> None:
    print(f"[ref-wheel] {msg}", flush=True)


def import_wheel(wheel_dir: Path):
    import mslk

    where = Path(mslk.__file__).resolve()
    wheel_dir = wheel_dir.resolve()
    from_repo = REPO in where.parents and REPO not in wheel_dir.parents  # e.g. --wheel-dir given as the repo
    if wheel_dir not in where.parents or from_repo:
        raise SystemExit(f"ref_wheel_moe_layers: mslk was imported from {where}, not from the wheel dir {wheel_dir}: "
                         "run with PYTHONPATH=<wheel dir> and without the repository on the path")
    version = "mslk-cuda (version unknown)"
    try:
        import importlib.metadata as md

        for d in md.distributions(path=[str(wheel_dir)]):
            if d.metadata["Name"] and d.metadata["Name"].lower().replace("_", "-").startswith("mslk"):
                version = f"{d.metadata['Name']} {d.version}"
    except Exception as e:  # only a label
        say(f"could not read the wheel's version: {e}")
    say(f"mslk from {where} ({version})")
    from mslk.moe.layers import BaselineMoE, MetaShufflingMoE, MoEArgs

    scaled = None
    try:
        from mslk.moe.layers import ScaledParameter as scaled
    except ImportError as e:
        say(f"no ScaledParameter in mslk.moe.layers ({e}); the 'scaled' init form is skipped")
    return version, {"MetaShufflingMoE": MetaShufflingMoE, "BaselineMoE": BaselineMoE}, MoEArgs, scaled


def init_process_group(device: torch.device, store: Path):
    """A one-rank process group (the layers take ProcessGroups; ep_size = mp_size = 1), and
    fairscale's model-parallel state of size 1 when fairscale is importable (the spec says the
    layers import it)."""
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, init_method=f"file://{store}", rank=0, world_size=1)
    say(f"torch.distributed: {backend}, world size 1")
    try:
        from fairscale.nn.model_parallel import initialize as fsi

        if not fsi.model_parallel_is_initialized():
            fsi.initialize_model_parallel(1)
        say("fairscale model parallel initialized (size 1)")
    except Exception as e:
        say(f"fairscale model parallel not initialized: {type(e).__name__}: {e}")
    return dist.group.WORLD


def is_fp8(layer, which: str):
    v = getattr(layer, f"is_{which}_fp8_rowwise", None)
    if v is None:  # no such property: look at the parameters
        return any(p.dtype == torch.float8_e4m3fn for p in layer.parameters())
    return bool(v)


def build(cls, MoEArgs, scaled, cfg, precision: str, device: torch.device, group, form: str):
    """Build through the public API; returns (layer, build info). Raises when no init form gives
    the requested precision."""
    forms = [form] if form != "auto" else (["fill", "tuple_bf16"] if precision == "bf16"
                                           else ["fill", "pair", "scaled", "tuple_fp8"])
    tried = []
    for f in forms:
        if f == "scaled" and scaled is None:
            continue
        init = S.RecordingInit(cfg, form=f, scaled_cls=scaled)
        say(f"build {cls.__name__} {precision} {cfg.shape}: init form {f!r}")
        try:
            layer = cls(group, group, MoEArgs(**cfg.moe_args(precision)))
            with torch.device(device):
                layer = layer.build(init) or layer
        except Exception as e:
            tried.append(f"{f}: {type(e).__name__}: {e}")
            say(f"  failed: {tried[-1]}\n{traceback.format_exc()}")
            continue
        off = sorted({str(t.device) for t in list(layer.parameters()) + list(layer.buffers())
                      if t.device.type != device.type})
        if off:
            say(f"  parameters on {off}: moving the layer to {device}")
            layer = layer.to(device)
        fp8 = {"routed": is_fp8(layer, "routed"), "shared": is_fp8(layer, "shared")}
        info = {"strategy": f, "keys": init.seen, "fp8": fp8, "moved_from": off, "failed_forms": tried}
        say(f"  built: keys asked {len(init.seen)}, FP8 routed {fp8['routed']} shared {fp8['shared']}")
        if precision == "bf16" or fp8["routed"]:
            return layer, info
        tried.append(f"{f}: built, but the routed weights are not FP8")
        del layer
    raise RuntimeError("no init form built the layer in " + precision + ": " + " | ".join(tried))


def run_config(cls, MoEArgs, scaled, cfg, precision, device, group, args, rows, save):
    cuda = device.type == "cuda"
    timer = common.time_ms if cuda else S.cpu_time_ms
    keys = [S.row_key(cfg, precision, p) for p in cfg.paths]
    try:
        layer, info = build(cls, MoEArgs, scaled, cfg, precision, device, group, args.init_form)
        n_sets = min(4, common.copies_to_exceed_l2(cfg.tokens * cfg.dim * 2)) if cuda else 2
        sets = S.input_sets(cfg, n_sets, device)
    except Exception as e:
        for k in keys:
            rows[k] = {"key": k, "error": f"build: {type(e).__name__}: {e}", "traceback": traceback.format_exc()}
        say(f"FAILED {keys}: {rows[keys[0]]['error']}")
        save()
        return
    x = sets[0][0]
    for path, key in zip(cfg.paths, keys):
        static = path == "static"
        row = rows[key] = {"key": key, "build": info}
        say(f"--- {key}")

        def fwd(x):
            return layer(x, static)

        try:
            out = fwd(x)
            if tuple(out.shape) != tuple(x.shape):
                raise RuntimeError(f"output shape {tuple(out.shape)}, expected {tuple(x.shape)}")
            row["fingerprint"] = S.fingerprint(out)
            row["finite"] = bool(out.float().isfinite().all())
            del out
            row["us"] = min(timer(fwd, sets, **S.TIME_KW) for _ in range(2)) * 1e3
            say(f"forward {row['us']:.1f} us")
            if cuda:
                ks, top = S.kernel_sum_us(lambda: fwd(x))
                row["kernel_sum_us"], row["top_kernels"] = ks, top
                say(f"kernel sum {ks:.1f} us; heaviest: " + "; ".join(f"{n} {us:.0f}" for n, us in top[:4]))
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {e}"
            row["traceback"] = traceback.format_exc()
            say(f"FAILED {key}: {row['error']}")
        save()
        if cuda and not args.no_graph and "error" not in row:
            try:
                row["graph_us"] = min(common.time_graph_ms(fwd, sets, reps=S.TIME_KW["reps"]) for _ in range(2)) * 1e3
                say(f"CUDA graph {row['graph_us']:.1f} us")
            except Exception as e:
                row["graph_error"] = f"{type(e).__name__}: {e}"
                say(f"CUDA graph failed: {row['graph_error']}")
                try:
                    torch.cuda.synchronize()
                except Exception as e2:  # a broken context: the rows after this one will say so
                    say(f"CUDA context after the failed capture: {type(e2).__name__}: {e2}")
            save()
    del layer, sets
    if cuda:
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    pp = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    ap.add_argument("--wheel-dir", type=Path, default=Path(pp[0]) if pp else None,
                    help="where the wheel was unpacked (default: the first PYTHONPATH entry)")
    ap.add_argument("--out", type=Path, default=Path("ref_wheel_moe_layers.json"))
    ap.add_argument("--quick", action="store_true", help="the small shapes of bench_moe_layers.py --quick")
    ap.add_argument("--only", default="", help="run rows whose key contains this text")
    ap.add_argument("--init-form", choices=("auto", "fill", "pair", "scaled"), default="auto")
    ap.add_argument("--no-graph", action="store_true", help="skip the CUDA-graph timing")
    args = ap.parse_args()
    if args.wheel_dir is None:
        raise SystemExit("ref_wheel_moe_layers: give --wheel-dir (or PYTHONPATH=<wheel dir>)")
    say(f"python {sys.version.split()[0]}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    version, classes, MoEArgs, scaled = import_wheel(args.wheel_dir)
    device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    elif not args.quick:
        raise SystemExit("ref_wheel_moe_layers: needs a CUDA device (or --quick)")
    label = common.device_label() if device.type == "cuda" else "CPU"
    say(f"device: {label}")
    result = {"wheel": version, "mslk_file": None, "device": label, "torch": torch.__version__,
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "quick": args.quick, "rows": {}}
    import mslk

    result["mslk_file"] = mslk.__file__

    def save():
        tmp = args.out.with_suffix(args.out.suffix + ".tmp")
        tmp.write_text(json.dumps(result, indent=1))
        tmp.replace(args.out)

    with tempfile.TemporaryDirectory() as d:
        group = init_process_group(device, Path(d) / "store")
        try:
            for cfg in (S.QUICK if args.quick else S.FULL):
                for precision in S.PRECISIONS:
                    if args.only and not any(args.only in S.row_key(cfg, precision, p) for p in cfg.paths):
                        continue
                    run_config(classes[cfg.layer], MoEArgs, scaled, cfg, precision, device, group, args,
                               result["rows"], save)
        finally:
            save()
            dist.destroy_process_group()
    bad = [k for k, r in result["rows"].items() if r.get("error")]
    say(f"wrote {args.out}: {len(result['rows'])} rows, {len(bad)} failed" + (f" ({bad})" if bad else ""))


if __name__ == "__main__":
    main()
