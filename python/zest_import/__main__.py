"""zest-import FILE.py:FACTORY -o model.mlir [--weights init.safetensors]

FACTORY() returns (module, loss_fn, example_batch); loss_fn(module, *batch)
is the scalar loss. Writes the training step as Zest contract IR and,
with --weights, the initial parameters as safetensors keyed by FQN.
"""

import argparse
import sys

from . import (
    ZestImportError,
    attention,
    import_model,
    load_factory,
    load_factory_shapes,
    loss,
    user_sources,
)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="zest-import",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    parser.add_argument("factory", help="FILE.py:FACTORY")
    parser.add_argument(
        "-o",
        "--output",
        required=True,
        help="where to write the IR (- for standard output)",
    )
    parser.add_argument(
        "--weights",
        help="write the initial parameters here (safetensors, keyed by FQN)",
    )
    parser.add_argument(
        "--name",
        help="the entry point's name (default: the "
        "model's class in snake case, e.g. llama_for_causal_lm)",
    )
    parser.add_argument(
        "--forward",
        action="store_true",
        help="also write NAME_forward: the loss in eval mode, "
        "without gradients (runs with --function)",
    )
    parser.add_argument(
        "--attention",
        choices=("fused", "math"),
        default=attention.MODE,
        help="scaled_dot_product_attention as Zest's fused op (default: "
        "FlashAttention-2, no [queries, keys] tensor kept) or as PyTorch's "
        "math path, every score materialized (for comparisons)",
    )
    parser.add_argument(
        "--loss",
        choices=("fused", "math"),
        default=loss.MODE,
        help="cross_entropy as Zest's fused op (default: each row read once, "
        "no log-probabilities kept) or as PyTorch's decomposition (for "
        "comparisons)",
    )
    parser.add_argument(
        "--shapes-only",
        action="store_true",
        help="build the model without storage for its weights (fake "
        "tensors): the step's IR for a model larger than this machine's "
        "memory, for zestc --plan-only; buffers and the example batch are "
        "zeros, and --weights is refused",
    )
    parser.add_argument(
        "--sources",
        metavar="FILE",
        help="write the Python source files the import loaded outside the "
        "installed packages (the factory's file and the modules it "
        "imports), one per line: what a cache of the IR depends on",
    )
    args = parser.parse_args(argv)
    if args.shapes_only and args.weights:
        parser.error("--shapes-only has no weights to write (--weights)")
    attention.MODE = args.attention
    loss.MODE = args.loss
    try:
        load = load_factory_shapes if args.shapes_only else load_factory
        model, loss_fn, batch = load(args.factory)
        text, weights = import_model(model, loss_fn, batch, args.name, args.forward)
    except ZestImportError as error:
        print(f"zest-import: error: {error}", file=sys.stderr)
        return 1
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w") as out:
            out.write(text)
    if args.weights:
        from safetensors.torch import save_file

        save_file(weights, args.weights)
    if args.sources:
        with open(args.sources, "w") as out:
            out.writelines(f"{path}\n" for path in user_sources(args.factory))
    return 0


if __name__ == "__main__":
    sys.exit(main())
