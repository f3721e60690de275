#!/usr/bin/env python3
"""Sums an Nsight Compute per-launch CSV (ncu --csv --metrics
gpu__time_duration.sum) by kernel: launches, total and mean time, share,
and the grid and block sizes seen, largest total first. Shipped in the GPU
bundle (run.sh --profile) to show where a training step's GPU time goes.

  kernel-profile.py NCU.csv [--steps N] [--top K]
"""
import argparse
import csv
import io
import sys
from collections import defaultdict

UNITS = {
    "ns": 1e-6,
    "nsecond": 1e-6,
    "us": 1e-3,
    "usecond": 1e-3,
    "ms": 1.0,
    "msecond": 1.0,
    "s": 1e3,
    "second": 1e3,
}


def rows(path):
    """The CSV rows of an ncu log (it may start with ==PROF== lines)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    start = text.find('"ID"')
    if start < 0:
        sys.exit(f'{path}: no ncu CSV header ("ID",...) found')
    return csv.DictReader(io.StringIO(text[start:]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv")
    parser.add_argument(
        "--steps",
        type=int,
        default=1,
        help="training steps the profile covers (per-step ms)",
    )
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    kernels = defaultdict(lambda: {"n": 0, "ms": 0.0, "shapes": set()})
    for row in rows(args.csv):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        scale = UNITS.get(row.get("Metric Unit", ""), None)
        if scale is None:
            continue
        value = float(row["Metric Value"].replace(",", ""))
        name = row["Kernel Name"]
        entry = kernels[name[:90]]
        entry["n"] += 1
        entry["ms"] += value * scale
        entry["shapes"].add(f'{row.get("Grid Size", "?")}x{row.get("Block Size", "?")}')
    total = sum(k["ms"] for k in kernels.values())
    launches = sum(k["n"] for k in kernels.values())
    print(
        f"kernel time {total:.3f} ms in {launches} launches "
        f"({total / args.steps:.3f} ms and {launches / args.steps:.0f} "
        f"launches per step over {args.steps} step(s))"
    )
    print(
        f"{'ms/step':>9} {'share':>6} {'launches':>8} {'mean us':>9}  kernel  grid x block"
    )
    ordered = sorted(kernels.items(), key=lambda item: -item[1]["ms"])
    for name, k in ordered[: args.top]:
        shapes = " ".join(sorted(k["shapes"])[:3])
        print(
            f"{k['ms'] / args.steps:9.3f} {100 * k['ms'] / total:5.1f}% "
            f"{k['n']:8d} {1000 * k['ms'] / k['n']:9.1f}  {name}  {shapes}"
        )


if __name__ == "__main__":
    main()
