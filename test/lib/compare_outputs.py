#!/usr/bin/env python3
"""Runs the first entry point of a shared library (zestc --emit=shared,
world size 1) on seeded random inputs and compares its first two results.

  compare_outputs.py libmodel.so [--seed S] [--scale X] --max-diff D

Prints the largest elementwise difference; fails if it exceeds D, or if it
is 0 while --must-differ is given (the two results come from different
computations, e.g. bf16 vs f32, and must not coincide exactly).
"""
import argparse
import ctypes
import random
import sys

from gradcheck import Buffer, parse_descriptor


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("library")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--scale", type=float, default=0.5)
    parser.add_argument("--max-diff", type=float, required=True)
    parser.add_argument("--must-differ", action="store_true")
    args = parser.parse_args()
    lib = ctypes.CDLL(args.library, mode=ctypes.RTLD_GLOBAL)
    text = ctypes.cast(
        ctypes.addressof(ctypes.c_char.in_dll(lib, "zest_model_descriptor")),
        ctypes.c_char_p,
    ).value.decode()
    function = parse_descriptor(text)[1][0]
    inputs = [Buffer(spec) for _, _, spec in function["args"]]
    outputs = [Buffer(spec) for _, _, spec in function["results"]]
    rng = random.Random(args.seed)
    for buffer in inputs:
        for i in range(len(buffer.values)):
            buffer.values[i] = rng.uniform(-args.scale, args.scale)
    pointers = (ctypes.c_void_p * (len(inputs) + len(outputs)))(
        *[ctypes.addressof(b.descriptor) for b in inputs + outputs]
    )
    lib.zest_init(None, None)
    entries = (ctypes.c_void_p * 1).in_dll(lib, "zest_model_entries")
    ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p))(entries[0])(pointers)
    lib.zest_finalize()
    diff = max(abs(a - b) for a, b in zip(outputs[0].values, outputs[1].values))
    print(f"compare-outputs: max difference {diff:.3g}")
    if diff > args.max_diff or (args.must_differ and diff == 0):
        sys.exit(1)


if __name__ == "__main__":
    main()
