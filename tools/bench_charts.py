"""Draw each benchmark table as a grouped bar chart: bench/<domain>/results_<name>.json ->
results_<name>.png beside the markdown. One group of bars per row (shape): mslk, each peer, and
the physical floor where the table has one.

    python3 tools/bench_charts.py            # after a benchmark run
"""
import json
import math
import re
import sys
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")  # no display on the build machines
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MAX_ROWS = 45  # rows per chart; a longer table is split over several PNGs

# Per table (keyed by <name> of results_<name>.json):
#   label: row -> group label (row is {header: cell})
#   unit:  axis unit; "us" means lower is better, throughput means higher is better
#   bars:  legend name -> column; the first is mslk's
#   floor: (legend name, numbers -> value or None), numbers being {header: parsed number or None};
#          None where the table has no floor
#   log:   log axis, for tables whose rows span orders of magnitude
CHARTS = {
    "fmha_fwd": dict(
        label=lambda r: f"B{r['B']} H{r['H']} S{r['S']} D{r['D']}" + (" causal" if r["causal"] else ""),
        unit="TFLOP/s",
        # Both kernels are mslk's (MSLK_FMHA_KERNEL=sm90 / sm80); sm90 is the H200 path.
        bars={"mslk sm90": "sm90 TFLOP/s", "mslk FA2 (sm80)": "FA2 TFLOP/s",
              "SDPA cuDNN": "cuDNN TFLOP/s", "SDPA flash": "flash TFLOP/s"},
        floor=None,
        log=False),
    "fp8_rowwise": dict(
        label=lambda r: f"M{r['M']} N{r['N']} K{r['K']}",
        unit="us",
        bars={"mslk": "mslk us", "torch._scaled_mm": "_scaled_mm us"},
        # Measured only for M <= 64, where the weight read bounds the time.
        floor=("floor (N*K bytes at copy BW)", lambda n: n["floor us"]),
        log=True),
    "fp8_grouped": dict(
        label=lambda r: f"E{r['E']} m{r['tokens/expert']} N{r['N']} K{r['K']} {r['routing']}",
        unit="TFLOP/s",
        bars={"mslk": "mslk TFLOP/s", "torch._scaled_grouped_mm": "_scaled_grouped_mm TFLOP/s",
              "torch._scaled_mm loop": "_scaled_mm loop TFLOP/s"},
        floor=None,
        log=False),
    "bf16_grouped": dict(
        label=lambda r: f"{r['pass']} E{r['E']} m{r['tokens/expert']} N{r['N']} K{r['K']} {r['routing']}",
        unit="TFLOP/s",
        bars={"mslk": "mslk TFLOP/s", "torch._grouped_mm": "_grouped_mm TFLOP/s", "torch.mm loop": "mm loop TFLOP/s"},
        floor=None,
        log=False),
    "moe_routing": dict(
        label=lambda r: r["op"],
        unit="us",
        bars={"mslk": "mslk", "torch": "torch"},
        # The table gives mslk's fraction of copy bandwidth; the copy-bound time is that fraction of mslk's.
        floor=("floor (bytes at copy BW)",
               lambda n: n["mslk"] * n["of copy bandwidth"] if n["of copy bandwidth"] else None),
        log=True),
    "fp8_quantize": dict(
        label=lambda r: f"{r['shape (bf16)']} {r['quantizer']}",
        # Time, not TB/s: the peer is only given as a time, and "time / floor" carries the
        # tensor rows' 5 B/elem floor that the 3 B/elem TB/s column does not.
        unit="us",
        bars={"mslk": "mslk us", "torch.compile": "torch.compile us"},
        floor=("floor (bytes at copy BW)", lambda n: n["mslk us"] / n["time / floor"] if n["time / floor"] else None),
        log=True),
    "decode": dict(
        label=lambda r: f"B{r['B']} Hq{r['Hq']}/{r['Hkv']} keys {r['keys']} D{r['D']}",
        unit="us",
        bars={"mslk decode": "decode us", "mslk decode (graph)": "graph: decode us", "SDPA enable_gqa": "SDPA us",
              "SDPA (graph)": "graph: SDPA us", "mslk general": "general (cutlass) us"},
        floor=("bar (K/V at 3.7 TB/s)", lambda n: n["KV MB"] / 3.7),  # MB / (TB/s) = us
        log=True),
    "fmha_bwd": dict(
        label=lambda r: f"B{r['B']} H{r['H']} S{r['S']} D{r['D']}" + (" causal" if r["causal"] == "True" or r["causal"] is True else ""),
        unit="TFLOP/s",
        bars={"mslk": "bwd TFLOP/s", "SDPA cuDNN": "cuDNN bwd TFLOP/s", "SDPA flash": "flash bwd TFLOP/s"},
        floor=None,
        log=False),
    "fp8_blockwise": dict(
        label=lambda r: f"M{r['M']} N{r['N']} K{r['K']}",
        unit="us",
        bars={"mslk": "mslk us", "torch._scaled_mm blockwise": "cuBLAS us"},
        floor=("floor (N*K bytes at copy BW)", lambda n: n["weight-read floor us"]),
        log=True),
    "int_gemm": dict(
        label=lambda r: f"M{r['M']} N{r['N']} K{r['K']}",
        unit="us",
        bars={"mslk i8i8bf16": "mslk us", "torch._int_mm + scale": "torch us"},
        floor=("floor (N*K bytes at copy BW)", lambda n: n.get("floor us")),
        log=True),
    "int_gemm_bf16x9": dict(
        label=lambda r: f"M{r['M']} N{r['N']} K{r['K']}",
        unit="us",
        bars={"mslk bf16x9_gemm": "mslk us", "torch.mm FP32": "torch us"},
        floor=None,
        log=True),
    "int4_gemm": dict(
        label=lambda r: f"M{r['M']} N{r['N']} K{r['K']}",
        unit="us",
        bars={"mslk bf16i4bf16_rowwise": "mslk us", "mslk f8i4bf16_rowwise": "mslk f8i4 us",
              "tinygemm": "tinygemm us", "bf16 torch.mm": "bf16 mm us"},
        floor=("floor (weight bytes at copy BW)", lambda n: n["weight floor us"]),
        log=True),
    "moe_layers": dict(
        label=lambda r: f"{r['layer']} {r['precision']} {r['path']} {r['shape']} T{r['tokens']}",
        unit="us",
        # The kernel sum is the layer's own device time: the bar its forward can approach.
        bars={"mslk": "mslk us", "mslk (graph)": "mslk graph us", "eager torch.mm loop": "eager us",
              "mslk-cuda 1.1.0 wheel": "ref wheel us"},
        floor=("kernel sum (profiler)", lambda n: n["kernel sum us"]),
        log=False),
}
CHARTS["fp8_blockwise_small_m"] = CHARTS["fp8_blockwise"]  # the same bench at M 1 and 16 (--ms 1,16)
CHARTS["int4_gemm_small_m"] = CHARTS["int4_gemm"]  # the same bench at M 1 and 16 (--ms 1,16)


def number(cell):
    """'27.1 us' -> 27.1, '98%' -> 0.98, '474 (loop)' -> 474, '-' -> None."""
    if isinstance(cell, bool):
        return None
    if isinstance(cell, (int, float)):
        return float(cell)
    m = re.match(r"\s*([-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?)\s*(%?)", str(cell))
    if not m:
        return None
    return float(m.group(1)) / (100 if m.group(2) else 1)


def note(cell):
    """A parenthesised qualifier on a cell, e.g. '(loop)', so the chart keeps it."""
    m = re.search(r"\((.*?)\)", str(cell))
    return m.group(1) if m else None


def draw(table, spec, rows, path, part):
    names = list(spec["bars"])
    if spec["floor"]:
        names.append(spec["floor"][0])
    labels, values = [], []
    for row in rows:
        raw = dict(zip(table["header"], row))
        nums = {k: number(v) for k, v in raw.items()}
        label = spec["label"](raw)
        vals = [nums[col] for col in spec["bars"].values()]
        quals = [f"{bar}: {note(raw[col])}" for bar, col in spec["bars"].items() if note(raw[col])]
        if quals:
            label += f" [{'; '.join(quals)}]"
        if spec["floor"]:
            vals.append(spec["floor"][1](nums))
        labels.append(label)
        values.append(vals)

    nb = len(names)
    bar_h = 0.8 / nb
    fig_h = 1.4 + len(rows) * (0.16 * nb + 0.1)
    fig, ax = plt.subplots(figsize=(11, fig_h))
    colors = ["#1f6fb4", "#e8892b", "#3a9a3a", "#9467bd", "#8c564b", "#17becf"][: len(spec["bars"])]
    if spec["floor"]:
        colors.append("#9a9a9a")
    for j, name in enumerate(names):
        ys = [i + (j - (nb - 1) / 2) * bar_h for i in range(len(rows))]
        xs = [v[j] if v[j] is not None else 0 for v in values]
        bars = ax.barh(ys, xs, height=bar_h, color=colors[j], label=name,
                       hatch="//" if spec["floor"] and j == nb - 1 else None, edgecolor="white", linewidth=0)
        for b, v in zip(bars, values):
            if v[j] is not None:
                ax.text(b.get_width(), b.get_y() + b.get_height() / 2, f" {v[j]:.3g}" if v[j] < 1000 else f" {v[j]:.0f}",
                        va="center", fontsize=6)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)  # table order, top to bottom, no empty margin
    if spec["log"]:
        # Bars on a log axis start at the left edge; a power of ten there keeps their lengths comparable.
        low = min(x for v in values for x in v if x)
        ax.set_xscale("log")
        ax.set_xlim(left=10 ** math.floor(math.log10(low)))
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.set_xlim(right=ax.get_xlim()[1] * (1.6 if spec["log"] else 1.08))  # room for the value labels
    better = "lower is better" if spec["unit"] == "us" else "higher is better"
    ax.set_xlabel(f"{'time (us)' if spec['unit'] == 'us' else spec['unit']}, {better}"
                  + (", log scale" if spec["log"] else ""))
    ax.grid(axis="x", which="both", alpha=0.3)
    ax.set_axisbelow(True)
    title = table["title"] + (f" (part {part})" if part else "")
    ax.set_title(f"{title}\n{table['date']}, {table['device']}", fontsize=10, pad=24)  # pad: room for the legend
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(names), fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})  # no version stamp: reruns diff cleanly
    plt.close(fig)


def main():
    written = []
    for src in sorted(ROOT.glob("bench/*/results_*.json")):
        name = src.stem[len("results_"):]
        if name.startswith("tune_"):
            continue  # tuning sweeps: one row per kernel config, not a comparison with peers
        if name not in CHARTS:
            print(f"no chart spec for {src.relative_to(ROOT)}; add one to CHARTS", file=sys.stderr)
            continue
        table = json.loads(src.read_text())
        rows = table["rows"]
        chunks = [rows[i:i + MAX_ROWS] for i in range(0, len(rows), MAX_ROWS)]
        for k, chunk in enumerate(chunks):
            suffix = f"_{k + 1}" if len(chunks) > 1 else ""
            out = src.with_name(f"results_{name}{suffix}.png")
            draw(table, CHARTS[name], chunk, out, k + 1 if len(chunks) > 1 else 0)
            written.append(out)
    for out in written:
        print(out.relative_to(ROOT))


if __name__ == "__main__":
    main()
