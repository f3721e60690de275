# A Mixtral (moe.py's) whose routers send tokens below VOCAB / 2 to experts
# 0 and 1 and the others to experts 2 and 3, in every layer: the embedding's
# first feature is +4 or -4 by token half, the other features small, and
# each router reads that feature alone. With data whose even micro-batches
# hold low tokens and odd ones high tokens, two ranks route to disjoint
# experts (test/Import/moe.test).
#
#   python moe_routing.py data OUT --samples N   token samples, raw int64
#   python moe_routing.py experts DATA --ranks W --micro B
#       each rank's experts per layer, from eager PyTorch at the factory's
#       weights, for the micro-batches of the first step
#   python moe_routing.py collectives TRACE...   each rank's collectives
#       (kind, unit and bytes, in order) from --trace files, and whether
#       they are the same
import importlib.util
import json
import os
import sys

import torch

_spec = importlib.util.spec_from_file_location(
    "moe_inputs", os.path.join(os.path.dirname(os.path.abspath(__file__)), "moe.py")
)
moe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(moe)


def make():
    model, loss_fn, batch = moe.mixtral()
    half = moe.VOCAB // 2
    with torch.no_grad():
        embed = model.model.embed_tokens.weight
        embed[:, 0] = torch.where(torch.arange(moe.VOCAB) < half, 4.0, -4.0)
        for layer in model.model.layers:
            router = layer.mlp.gate.weight
            router.zero_()
            router[:, 0] = torch.tensor([3.0, 2.0, -2.0, -3.0])
    return model, loss_fn, batch


def write_data(path, samples):
    """Sample i holds low tokens when (i // BATCH) is even, else high."""
    half = moe.VOCAB // 2
    generator = torch.Generator().manual_seed(0)
    with open(path, "wb") as out:
        for i in range(samples):
            low = (i // moe.BATCH) % 2 == 0
            tokens = torch.randint(0, half, (moe.SEQ,), generator=generator)
            out.write((tokens if low else tokens + half).numpy().tobytes())


def experts_per_rank(path, ranks, micro):
    model, _, _ = make()
    tokens = torch.frombuffer(bytearray(open(path, "rb").read()), dtype=torch.int64)
    tokens = tokens.view(-1, moe.SEQ)
    chosen = []
    hooks = [
        layer.mlp.gate.register_forward_hook(
            lambda module, inputs, output: chosen.append(output[2])
        )
        for layer in model.model.layers
    ]
    for rank in range(ranks):
        chosen.clear()
        with torch.no_grad():
            model(input_ids=tokens[rank * micro : (rank + 1) * micro])
        sets = [sorted(set(c.flatten().tolist())) for c in chosen]
        print(
            f"rank {rank}: "
            + ", ".join(f"layer {i} experts {s}" for i, s in enumerate(sets))
        )
    for hook in hooks:
        hook.remove()


def collectives(paths):
    sequences = []
    for path in paths:
        events = json.load(open(path))
        events = events["traceEvents"] if isinstance(events, dict) else events
        sequence = [
            e["name"] for e in events if e.get("cat") == "comm" and e.get("ph") == "X"
        ]
        sequences.append(sequence)
        print(f"{os.path.basename(path)}: {len(sequence)} collectives")
    same = all(s == sequences[0] for s in sequences)
    print("same collectives on every rank" if same else "collectives differ")


if __name__ == "__main__":
    command = sys.argv[1]
    if command == "data":
        write_data(sys.argv[2], int(sys.argv[sys.argv.index("--samples") + 1]))
    elif command == "experts":
        experts_per_rank(
            sys.argv[2],
            int(sys.argv[sys.argv.index("--ranks") + 1]),
            int(sys.argv[sys.argv.index("--micro") + 1]),
        )
    else:
        collectives(sys.argv[2:])
