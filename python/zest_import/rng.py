"""Counter-based random streams for dropout (and any Bernoulli draw).

A traced step cannot keep PyTorch's generator: torch-mlir turns it into a
global seed that every rank starts from 0 and no checkpoint holds. Instead,
an imported step that draws random numbers takes one more argument,
``{zest.rng}``: a ``tensor<2xi64>`` holding the step's key and the index,
within the step's global batch, of the micro-batch's first sample. The
executable fills it (runtime/trainer/Data.h): the key is ``step_key(seed,
step)``, so the streams follow from ``--seed`` and the step number that
checkpoints hold.

Element j of the d-th draw of the step, in a tensor whose first dimension is
the micro-batch (batch-major), for the sample at global index g, is

    u = mix(counter ^ mix(key + d * GOLDEN)) >> 40,  counter = g * inner + j

(``inner``: elements per sample) and is kept when u < round(p 2^24). A sample
gets the same masks at any world size and any accumulation. A draw whose
first dimension is not the micro-batch still gets disjoint streams per rank,
but its masks then depend on how the batch is split.

The functions here run in eager PyTorch (zest_import.reference) and under
make_fx (zest_import.trace_step) alike, so the imported step and the eager
reference draw the same masks.
"""

import torch

_MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
_C1, _C2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def signed(value):
    """A 64-bit pattern as the int64 that holds it."""
    value &= _MASK64
    return value - (1 << 64) if value >= 1 << 63 else value


def mix(value):
    """splitmix64's finalizer on a Python int (zest::mix in the runtime)."""
    z = (value + GOLDEN) & _MASK64
    z = ((z ^ (z >> 30)) * _C1) & _MASK64
    z = ((z ^ (z >> 27)) * _C2) & _MASK64
    return z ^ (z >> 31)


def step_key(seed, step):
    """The key of training step `step` (0-based) under `--seed seed`; the
    executable computes the same (zest::rngStepKey)."""
    return mix(mix(seed ^ 0xD509_0D09_5EED) + step)


def _shr(z, bits):
    """Logical right shift of an int64 tensor."""
    return (z >> bits) & ((1 << (64 - bits)) - 1)


def _mix_tensor(z):
    """mix() on an int64 tensor, wrapping as uint64 arithmetic does."""
    z = z + signed(GOLDEN)
    z = (z ^ _shr(z, 30)) * signed(_C1)
    z = (z ^ _shr(z, 27)) * signed(_C2)
    return z ^ _shr(z, 31)


class Streams:
    """The draws of one micro-batch: `rng` is its (key, first sample)
    tensor, `micro` the micro-batch size."""

    def __init__(self, rng, micro):
        self.rng = rng
        self.micro = micro
        self.draws = 0

    def bits(self, shape, device=None):
        """24 uniform random bits per element of a tensor of `shape`, as
        int64: the next draw."""
        draw = self.draws
        self.draws += 1
        numel = 1
        for size in shape:
            numel *= size
        batch_major = len(shape) > 0 and shape[0] == self.micro
        inner = numel // self.micro if batch_major else numel
        key = _mix_tensor(self.rng[0] + signed(draw * GOLDEN))
        counter = self.rng[1] * inner + torch.arange(
            numel, dtype=torch.int64, device=device
        ).reshape(shape)
        return _shr(_mix_tensor(counter ^ key), 40)

    def uniform(self, shape, device=None):
        """U[0, 1) in float32 on a 2^-24 grid."""
        return self.bits(shape, device).to(torch.float32) * (1.0 / (1 << 24))

    def bernoulli(self, like, p):
        """A tensor shaped and typed like `like`: 1 with probability p
        (rounded to a multiple of 2^-24; compared as integers, so eager and
        compiled code agree exactly)."""
        threshold = int(round(float(p) * (1 << 24)))
        keep = self.bits(tuple(like.shape), like.device) < threshold
        return keep.to(like.dtype)


# The ATen random ops that Streams replaces. Dropout reaches them as
# bernoulli_ on an empty tensor (eager) or bernoulli.p (functionalized).
def _bernoulli_p(streams, like, p=0.5, generator=None):
    return streams.bernoulli(like, p)


def _bernoulli_tensor(streams, probabilities, generator=None):
    keep = (
        streams.uniform(tuple(probabilities.shape), probabilities.device)
        < probabilities
    )
    return keep.to(probabilities.dtype)


def replacements(streams):
    """{ATen overload: implementation} drawing from `streams`."""
    aten = torch.ops.aten
    return {
        aten.bernoulli.p: lambda x, p=0.5, generator=None: _bernoulli_p(streams, x, p),
        aten.bernoulli.default: lambda x, generator=None: _bernoulli_tensor(streams, x),
    }


def inplace_replacements(streams):
    """The in-place forms eager dropout calls, for a dispatch mode."""
    aten = torch.ops.aten
    return {
        aten.bernoulli_.float: lambda x, p=0.5, generator=None: x.copy_(
            _bernoulli_p(streams, x, p)
        ),
        aten.bernoulli_.Tensor: lambda x, p, generator=None: x.copy_(
            _bernoulli_tensor(streams, p.expand_as(x))
        ),
    }


# Random ops with no counter-based replacement: the importer refuses them.
UNSUPPORTED = (
    "rand",
    "randn",
    "randint",
    "randperm",
    "normal",
    "uniform",
    "exponential",
    "multinomial",
    "random",
    "rand_like",
    "randn_like",
    "randint_like",
    "cauchy",
    "geometric",
    "log_normal",
    "poisson",
    "native_dropout",
)


class EagerStreams(torch.utils._python_dispatch.TorchDispatchMode):
    """Eager PyTorch with Streams in place of its generator for Bernoulli
    draws (dropout), for reference runs of imported models."""

    def __init__(self, rng, micro):
        super().__init__()
        self.streams = Streams(rng, micro)
        self.table = {
            **replacements(self.streams),
            **inplace_replacements(self.streams),
        }

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        implementation = self.table.get(func)
        if implementation is None:
            return func(*args, **kwargs)
        return implementation(*args, **kwargs)
