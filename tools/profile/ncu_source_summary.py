"""Summarises an Nsight Compute per-instruction export (ncu --section SourceCounters --page source
--print-source sass --csv, gzipped): warp-stall samples by reason and by opcode, and executed warp
instructions by opcode. Usage: python3 tools/profile/ncu_source_summary.py <file.csv.gz> [...]"""
import collections
import csv
import gzip
import sys


def load(path):
    with gzip.open(path, "rt") as f:
        rows = list(csv.reader(f))
    h = next(i for i, r in enumerate(rows) if r and r[0] == "Address")  # ncu prints log lines first
    return rows[h], [r for r in rows[h + 1:] if len(r) >= len(rows[h])]


def opcode(src):
    toks = src.split()
    return (toks[1] if toks and toks[0].startswith("@") else toks[0] if toks else "").split(".")[0]


def main():
    for path in sys.argv[1:]:
        hdr, data = load(path)
        col = {h: i for i, h in enumerate(hdr)}
        stalls = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
        by_stall, by_op, executed = collections.Counter(), collections.Counter(), collections.Counter()
        for r in data:
            n = float(r[col["Warp Stall Sampling (All Samples)"]] or 0)
            op = opcode(r[col["Source"]])
            by_op[op] += n
            executed[op] += float(r[col["Instructions Executed"]] or 0)
            for s in stalls:
                by_stall[s[6:]] += float(r[col[s]] or 0)
        total, ex = sum(by_op.values()) or 1.0, sum(executed.values()) or 1.0
        print(f"{path}: {total:.0f} stall samples, {ex:.3g} warp instructions")
        print("  samples by reason: " + ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in by_stall.most_common(8)))
        print("  samples by opcode: " + ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in by_op.most_common(10)))
        print("  executed by opcode: " + ", ".join(f"{k} {100 * v / ex:.1f}%" for k, v in executed.most_common(10)))


if __name__ == "__main__":
    main()
