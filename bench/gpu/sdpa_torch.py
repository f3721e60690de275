"""PyTorch's scaled_dot_product_attention at the shapes of
zest-bench-cuda-attention (bench/gpu/attention.cpp): causal, f32 and bf16,
forward and backward milliseconds (medians of CUDA-event timings) and
TFLOP/s counted the same way (2 B H S^2 D forward, 2.5x backward).

    python3 bench/gpu/sdpa_torch.py [reps]
"""

import sys

import torch
import torch.nn.functional as F

SHAPES = [
    ("gpt2 8x512 h12 d64", 8, 12, 12, 512, 64),
    ("llama 8x512 h32/8 d64", 8, 32, 8, 512, 64),
    ("2x2048 h16 d128", 2, 16, 16, 2048, 128),
]


def median_ms(reps, run):
    run()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    return times[len(times) // 2]


def time_shape(batch, heads, kv_heads, seq, dim, dtype, reps):
    def tensor(h):
        return torch.randn(batch, h, seq, dim, device="cuda", dtype=dtype)

    q, k, v = tensor(heads), tensor(kv_heads), tensor(kv_heads)
    q.requires_grad_(), k.requires_grad_(), v.requires_grad_()
    gqa = kv_heads != heads

    def forward():
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)

    fwd = median_ms(reps, forward)
    out = forward()
    dout = torch.randn_like(out)
    bwd = median_ms(
        reps, lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    )
    return fwd, bwd


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    torch.backends.cuda.matmul.allow_tf32 = False
    print(
        f"{'shape (causal)':24} {'type':5} {'kernels':9} {'fwd ms':>10} {'TFLOP/s':>8} {'bwd ms':>10} {'TFLOP/s':>8}"
    )
    for name, b, h, kv, s, d in SHAPES:
        for dtype, label in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
            fwd, bwd = time_shape(b, h, kv, s, d, dtype, reps)
            flops = 2.0 * b * h * s * s * d
            print(
                f"{name:24} {label:5} {'sdpa':9} {fwd:10.3f} {flops / fwd / 1e9:8.2f}"
                f" {bwd:10.3f} {2.5 * flops / bwd / 1e9:8.2f}"
            )


if __name__ == "__main__":
    main()
