#!/usr/bin/env python3
"""Checks a compiled training step's gradients against finite differences,
through the shared-library C ABI of docs/Runtime.md (ctypes, no numpy).

  gradcheck.py libmodel.so [--samples N] [--seed S]

The library must be compiled for world size 1 (zestc --emit=shared). For N
random elements of the flat parameter buffers, the central difference of the
loss with step h is compared with the gradient the step returns.
"""
import argparse
import ctypes
import math
import random
import sys


class Spec:
    def __init__(self, dtype, shape):
        self.dtype, self.shape = dtype, shape
        self.numel = math.prod(shape) if shape else 1


def parse_descriptor(text):
    units, functions = {}, []
    for line in text.splitlines():
        f = line.split()
        if not f:
            continue
        if f[0] == "unit":
            units[f[1]] = {"kind": f[2], "dtype": f[3], "shard": int(f[6])}
        elif f[0] == "function":
            functions.append({"name": f[1], "args": [], "results": []})
        elif f[0] in ("arg", "result"):
            key = "args" if f[0] == "arg" else "results"
            if f[1] in ("unit", "grad"):
                spec = Spec(units[f[2]]["dtype"], [units[f[2]]["shard"]])
                functions[-1][key].append((f[1], f[2], spec))
            else:
                rank = int(f[3])
                spec = Spec(f[2], [int(d) for d in f[4 : 4 + rank]])
                functions[-1][key].append((f[1], None, spec))
    return units, functions


CTYPES = {"F32": ctypes.c_float, "I64": ctypes.c_int64, "I32": ctypes.c_int32}


class Buffer:
    def __init__(self, spec):
        if spec.dtype not in CTYPES:
            sys.exit(f"gradcheck: unsupported dtype {spec.dtype}")
        self.integer = spec.dtype != "F32"
        self.values = (CTYPES[spec.dtype] * spec.numel)()
        address = ctypes.addressof(self.values)
        strides, stride = [], 1
        for dim in reversed(spec.shape):
            strides.insert(0, stride)
            stride *= dim
        fields = [address, address, 0] + spec.shape + strides
        self.descriptor = (ctypes.c_int64 * len(fields))(*fields)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("library")
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--step", type=float, default=1e-2)
    parser.add_argument(
        "--int-bound", type=int, default=16, help="integer data is drawn from [0, N)"
    )
    args = parser.parse_args()

    lib = ctypes.CDLL(args.library, mode=ctypes.RTLD_GLOBAL)
    # The descriptor is a char array, not a pointer: take its address.
    text = ctypes.cast(
        ctypes.addressof(ctypes.c_char.in_dll(lib, "zest_model_descriptor")),
        ctypes.c_char_p,
    ).value.decode()
    units, functions = parse_descriptor(text)
    if "world_size 1" not in text:
        sys.exit("gradcheck: compile the library with --world-size=1")
    fn = next(
        i for i, f in enumerate(functions) if any(r[0] == "loss" for r in f["results"])
    )
    function = functions[fn]
    entry_type = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p))
    entries = (ctypes.c_void_p * len(functions)).in_dll(lib, "zest_model_entries")
    step_fn = entry_type(entries[fn])

    lib.zest_init(None, None)
    rng = random.Random(args.seed)
    arg_buffers = [Buffer(spec) for _, _, spec in function["args"]]
    result_buffers = [Buffer(spec) for _, _, spec in function["results"]]
    for (kind, _, spec), buffer in zip(function["args"], arg_buffers):
        scale = 0.3 if kind == "unit" else 1.0
        for i in range(spec.numel):
            buffer.values[i] = (
                rng.randrange(args.int_bound)
                if buffer.integer
                else rng.uniform(-scale, scale)
            )
    pointers = (ctypes.c_void_p * (len(arg_buffers) + len(result_buffers)))(
        *[ctypes.addressof(b.descriptor) for b in arg_buffers + result_buffers]
    )

    def run():
        step_fn(pointers)
        loss_index = next(
            i for i, r in enumerate(function["results"]) if r[0] == "loss"
        )
        return result_buffers[loss_index].values[0]

    run()
    grads = {}
    for (kind, unit, _), buffer in zip(function["results"], result_buffers):
        if kind == "grad":
            grads[unit] = list(buffer.values)
    candidates = []
    for (kind, unit, spec), buffer in zip(function["args"], arg_buffers):
        if kind == "unit":
            candidates += [(unit, buffer, i) for i in range(spec.numel)]
    failures, worst = 0, 0.0
    for unit, buffer, i in rng.sample(candidates, min(args.samples, len(candidates))):
        original = buffer.values[i]
        buffer.values[i] = original + args.step
        up = run()
        buffer.values[i] = original - args.step
        down = run()
        buffer.values[i] = original
        numeric = (up - down) / (2 * args.step)
        analytic = grads[unit][i]
        error = abs(numeric - analytic)
        worst = max(worst, error / max(abs(analytic), 1e-2))
        if error > 2e-3 + 3e-2 * abs(analytic):
            failures += 1
            print(
                f"MISMATCH {unit}[{i}]: finite difference {numeric:.6g}, "
                f"gradient {analytic:.6g}"
            )
    lib.zest_finalize()
    print(
        f"gradcheck: {min(args.samples, len(candidates))} elements, "
        f"{failures} mismatches, worst relative error {worst:.2e}"
    )
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
