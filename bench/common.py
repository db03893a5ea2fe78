"""Timing helpers shared by the benchmarks: CUDA events, warm-up, median, rotating inputs."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import statistics
import time
from pathlib import Path

import torch

L2_BYTES = 60 * 2**20


@contextlib.contextmanager
def env_var(name: str, value):
    """Sets (value: str) or unsets (value: None) an environment variable for the calls inside:
    the ops read their kernel switches (MSLK_*) on every call, so one run can time each path."""
    old = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def copies_to_exceed_l2(nbytes: int, factor: int = 3) -> int:
    """How many input sets to rotate through so the working set is >= factor x L2."""
    return max(2, -(-factor * L2_BYTES // max(nbytes, 1)))


def time_ms(fn, arg_sets, reps: int = 15, calls: int = 10, warmup: int = 3) -> float:
    """Median over reps of (time of `calls` back-to-back calls, rotating arg_sets) / calls.

    Calls are queued back to back so host overhead overlaps device work, as in a model. Warm-up
    runs at least `warmup` calls and 30 ms of GPU work: three calls of a short kernel left the clocks
    low (the same decode kernel timed 91 and 77 us in one run, 2026-11-30).
    """
    t_end, i = time.perf_counter() + 0.03, 0
    while i < warmup or time.perf_counter() < t_end:
        fn(*arg_sets[i % len(arg_sets)])
        i += 1
        if i % 4 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    times = []
    k = 0
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn(*arg_sets[k % len(arg_sets)])
            k += 1
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)


def time_graph_ms(fn, arg_sets, reps: int = 15) -> float:
    """Device time per call: one CUDA graph of a pass over arg_sets, replayed; median of reps."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for a in arg_sets:  # warm-up outside capture
            fn(*a)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for a in arg_sets:
            fn(*a)
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / len(arg_sets))
    del graph
    return statistics.median(times)


def time_pair_ms(fn_a, fn_b, arg_sets, rounds: int = 2, **kw) -> tuple[float, float]:
    """time_ms of two functions, alternating a, b, a, b...; each keeps its best round's median.
    A single pass favoured whichever ran second (clocks still settling; the same kernel measured
    91 and 77 us in one run, 2026-11-30). fn_b may raise RuntimeError (a peer refusing the shape):
    its time is then nan."""
    ta, tb = [], []
    for _ in range(rounds):
        ta.append(time_ms(fn_a, arg_sets, **kw))
        try:
            tb.append(time_ms(fn_b, arg_sets, **kw))
        except RuntimeError:
            tb.append(float("nan"))
    return min(ta), min(tb) if all(t == t for t in tb) else float("nan")


def time_rotated_ms(timers: dict, rounds: int = 3) -> dict:
    """{name: ms} of zero-argument timers (each returns one time_ms), run round-robin for `rounds`
    rounds with the starting timer rotated each round; each keeps its best round. Configurations of
    one kernel timed once each, in a fixed order, differed by up to 5% from the same configuration
    timed again in that run (the clock state at each one's turn, 2026-12-05): too coarse to rank
    rows a few percent apart."""
    names = list(timers)
    best = {n: float("inf") for n in names}
    for r in range(rounds):
        k = r * max(1, len(names) // rounds)
        for n in names[k:] + names[:k]:
            best[n] = min(best[n], timers[n]())
    return best


def copy_bandwidth_tbs(nbytes: int = 2 * 2**30) -> float:
    """Device copy bandwidth, bytes read + written per second (TB/s), the memory ceiling."""
    x = torch.empty(nbytes // 2, dtype=torch.bfloat16, device="cuda").normal_()
    y = torch.empty_like(x)
    ms = time_ms(lambda a, b: b.copy_(a), [(x, y)], reps=10, calls=5)
    del x, y
    return 2 * nbytes / (ms * 1e-3) / 1e12


def device_label() -> str:
    p = torch.cuda.get_device_properties(0)
    return f"{p.name} ({p.multi_processor_count} SMs), torch {torch.__version__}, CUDA {torch.version.cuda}"


def write_results(path: Path, title: str, header: list[str], rows: list[list], notes: str = "") -> None:
    """Markdown table + JSON twin, stamped with date and device."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# {title}", "", f"Measured {stamp} on {device_label()}.", ""]
    if notes:
        lines += [notes, ""]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    path.write_text("\n".join(lines) + "\n")
    path.with_suffix(".json").write_text(json.dumps(
        {"title": title, "date": stamp, "device": device_label(), "header": header, "rows": rows}, indent=1))
