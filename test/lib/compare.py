#!/usr/bin/env python3
"""Compares Zest runs for the equivalence tests.

  compare.py losses REF OTHER... [--rtol R]
      every `step N loss X` line of each OTHER matches REF's step N (OTHER
      may cover only some of REF's steps).
  compare.py params REF.safetensors OTHER.safetensors... [--rtol R]
      every tensor of each OTHER matches REF elementwise.
  compare.py checksums REF OTHER... [--rtol R]
      the `checksum X` line of each OTHER (a forward-only run) matches REF's.
  compare.py falling LOG
      the mean loss of the last third of the steps is below the first's.

Relative tolerance with an absolute floor of rtol for values near zero.
"""
import re
import struct
import sys


def parse_losses(path):
    losses = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"step (\d+) loss (\S+)$", line.strip())
            if m:
                losses[int(m.group(1))] = float(m.group(2))
    if not losses:
        sys.exit(f"compare: no 'step N loss X' lines in {path}")
    return losses


def parse_checksum(path):
    with open(path) as f:
        for line in f:
            m = re.match(r"checksum (\S+)$", line.strip())
            if m:
                return {0: float(m.group(1))}
    sys.exit(f"compare: no 'checksum X' line in {path}")


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    import json

    header = json.loads(data[8 : 8 + length])
    body = data[8 + length :]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            sys.exit(f"compare: {path}: {name} is {info['dtype']}, want F32")
        begin, end = info["data_offsets"]
        tensors[name] = struct.unpack(f"<{(end - begin) // 4}f", body[begin:end])
    return tensors


def close(a, b, rtol):
    return abs(a - b) <= rtol * max(abs(a), abs(b), 1.0)


def main():
    args = sys.argv[1:]
    rtol = 1e-5
    if "--rtol" in args:
        i = args.index("--rtol")
        rtol = float(args[i + 1])
        del args[i : i + 2]
    mode, ref, others = args[0], args[1], args[2:]
    if mode == "falling":
        losses = parse_losses(ref)
        # Mean of the first and of the last third of the steps.
        values = [losses[k] for k in sorted(losses)]
        third = max(1, len(values) // 3)
        first = sum(values[:third]) / third
        last = sum(values[-third:]) / third
        if not last < first:
            sys.exit(f"compare: loss did not fall: {first} -> {last}")
        print(f"loss falls: {first:.6g} -> {last:.6g}")
        return
    load = {
        "losses": parse_losses,
        "checksums": parse_checksum,
        "params": read_safetensors,
    }[mode]
    reference = load(ref)
    for other in others:
        values = load(other)
        if not set(values) <= set(reference) or not values:
            sys.exit(
                f"compare: {other} has keys {sorted(values)[:5]}..., "
                f"{ref} has {sorted(reference)[:5]}..."
            )
        worst = 0.0
        for key, value in values.items():
            ref_value = reference[key]
            pairs = zip(ref_value, value) if mode == "params" else [(ref_value, value)]
            for a, b in pairs:
                if not close(a, b, rtol):
                    sys.exit(
                        f"compare: {other}: {key}: {b!r} differs from "
                        f"{a!r} (rtol {rtol})"
                    )
                worst = max(worst, abs(a - b) / max(abs(a), abs(b), 1.0))
        print(
            f"{other}: {len(values)} {mode} match "
            f"(max relative difference {worst:.2e})"
        )


if __name__ == "__main__":
    main()
