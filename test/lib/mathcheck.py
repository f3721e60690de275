#!/usr/bin/env python3
"""Measures the error of the compiled math functions over the whole f32 range
(ctypes, standard library only) and checks it against bounds in ULPs.

  mathcheck.py libmath.so [--stride S] [--bound NAME=ULPS ...]

libmath.so is test/E2E/Inputs/math-functions.mlir compiled with
--emit=shared: one data argument x, one result per function, in the order of
FUNCTIONS. Inputs are every S-th f32 bit pattern (both signs, zeros,
subnormals, normals, infinities; NaNs skipped) plus special values. The
reference is Python's double-precision math module rounded to f32; the error
is |compiled - reference| in units of the f32 spacing at the reference
(ULPs); a subnormal reference result may flush to zero (absolute error below
the smallest normal, 2^-126). Results must also agree on infinities and NaNs.
"""
import argparse
import ctypes
import math
import struct
import sys

from gradcheck import Buffer, parse_descriptor

FUNCTIONS = ["tanh", "erf", "exp", "expm1", "log", "log1p", "log2"]


def to_f32(x):
    """Rounds a double to the nearest f32 (inf past the range)."""
    if math.isnan(x) or math.isinf(x):
        return x
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def f32_from_bits(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def ulp(x):
    """Spacing of f32 values at |x| (subnormal spacing near zero)."""
    x = abs(x)
    if x < 2.0**-126:
        return 2.0**-149
    return 2.0 ** (math.frexp(x)[1] - 24)


def reference(name, x):
    try:
        if name == "tanh":
            return math.tanh(x)
        if name == "erf":
            return math.erf(x)
        if name == "exp":
            return math.exp(x)
        if name == "expm1":
            return math.expm1(x)
        if name == "log":
            return -math.inf if x == 0 else math.log(x) if x > 0 else math.nan
        if name == "log1p":
            return -math.inf if x == -1 else math.log1p(x) if x > -1 else math.nan
        if name == "log2":
            return -math.inf if x == 0 else math.log2(x) if x > 0 else math.nan
    except OverflowError:
        return math.inf
    raise ValueError(name)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("library")
    parser.add_argument("--stride", type=int, default=4099)
    parser.add_argument(
        "--bound",
        action="append",
        default=[],
        help="NAME=ULPS: fail if NAME's worst error is larger",
    )
    args = parser.parse_args()
    bounds = dict((b.split("=")[0], float(b.split("=")[1])) for b in args.bound)

    lib = ctypes.CDLL(args.library, mode=ctypes.RTLD_GLOBAL)
    text = ctypes.cast(
        ctypes.addressof(ctypes.c_char.in_dll(lib, "zest_model_descriptor")),
        ctypes.c_char_p,
    ).value.decode()
    _, functions = parse_descriptor(text)
    function = functions[0]
    entries = (ctypes.c_void_p * 1).in_dll(lib, "zest_model_entries")
    run = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p))(entries[0])
    lib.zest_init(None, None)
    x_buffer = Buffer(function["args"][0][2])
    results = [Buffer(spec) for _, _, spec in function["results"]]
    pointers = (ctypes.c_void_p * (1 + len(results)))(
        *[ctypes.addressof(b.descriptor) for b in [x_buffer] + results]
    )
    n = function["args"][0][2].numel

    inputs = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        2.0**-149,
        -(2.0**-149),
        2.0**-126,
        88.7,
        89.0,
        -87.3,
        -104.0,
        9.0,
        -9.0,
        1e-8,
        -1e-8,
        math.inf,
        -math.inf,
    ]
    inputs += [f32_from_bits(b) for b in range(0, 2**32, args.stride)]
    inputs = [x for x in inputs if not math.isnan(x)]
    worst = {name: (0.0, 0.0) for name in FUNCTIONS}
    mismatches = 0
    for begin in range(0, len(inputs), n):
        chunk = inputs[begin : begin + n]
        chunk += [0.0] * (n - len(chunk))
        for i, x in enumerate(chunk):
            x_buffer.values[i] = x
        run(pointers)
        for name, buffer in zip(FUNCTIONS, results):
            for i, x in enumerate(chunk[: len(inputs) - begin]):
                got = buffer.values[i]
                want = to_f32(reference(name, x))
                if math.isnan(want) or math.isinf(want):
                    same = math.isnan(got) if math.isnan(want) else got == want
                    if not same:
                        mismatches += 1
                        if mismatches <= 10:
                            print(
                                f"MISMATCH {name}({x!r}) = {got!r}, "
                                f"expected {want!r}"
                            )
                    continue
                if math.isnan(got) or math.isinf(got):
                    error = math.inf
                elif abs(want) < 2.0**-126:
                    # A subnormal result may flush to zero: the absolute
                    # error must stay below the smallest normal.
                    if abs(got - want) >= 2.0**-126:
                        error = math.inf
                    else:
                        continue
                else:
                    error = abs(got - want) / ulp(want)
                if error > worst[name][0]:
                    worst[name] = (error, x)
    lib.zest_finalize()
    failed = mismatches > 0
    for name in FUNCTIONS:
        error, x = worst[name]
        bound = bounds.get(name)
        verdict = ""
        if bound is not None:
            verdict = " ok" if error <= bound else f" ABOVE BOUND {bound:g}"
            failed |= error > bound
        print(f"{name}: max error {error:.3g} ulp at x = {x!r}{verdict}")
    print(f"mathcheck: {len(inputs)} inputs, {mismatches} special-value mismatches")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
