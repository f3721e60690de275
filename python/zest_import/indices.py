"""Which data inputs index a table, found on the traced step: an embedding's
ids, an index_select's or gather's indices, a loss's targets. Each becomes
``zest.index_bound = {bound = N, table = "fqn", ignore = I}`` on its data
argument, and the executable checks every batch against it before the first
step (runtime/trainer/IndexChecks.h), naming the file, the sample, the
value and the table, instead of failing inside the step."""

import torch

aten = torch.ops.aten

# Ops whose result holds values of their first operand (reshaped, sliced,
# converted): an index that flows through them still comes from the data.
_PASS_THROUGH = {
    aten.view.default,
    aten._unsafe_view.default,
    aten.reshape.default,
    aten.slice.Tensor,
    aten.select.int,
    aten.unsqueeze.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.squeeze.default,
    aten.expand.default,
    aten.permute.default,
    aten.t.default,
    aten.transpose.int,
    aten.clone.default,
    aten.alias.default,
    aten._to_copy.default,
    aten.lift_fresh_copy.default,
    aten.flatten.using_ints,
}


def _source(node):
    """The placeholder `node`'s values come from, if only pass-through ops
    lie between them."""
    while node.op == "call_function" and node.target in _PASS_THROUGH:
        node = node.args[0]
    return node if node.op == "placeholder" else None


def _is_integer(node):
    """Whether the placeholder holds integers (ids can be checked; a float
    input converted to indices inside the step cannot be, as such)."""
    value = node.meta.get("val")
    return (
        value is not None
        and not value.dtype.is_floating_point
        and not value.dtype.is_complex
        and value.dtype != torch.bool
    )


def _size(node, dim):
    value = node.meta.get("val")
    if value is None or dim >= value.dim() or dim < -value.dim():
        return None
    return int(value.shape[dim])


def _uses(graph):
    """(index node, bound, table node or None, ignored value or None) for
    every op of `graph` that indexes with an operand."""
    zest_ops = getattr(torch.ops, "zest", None)
    cross_entropy = getattr(zest_ops, "cross_entropy", None)
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        target, args = node.target, node.args
        if target is aten.embedding.default:
            yield args[1], _size(args[0], 0), args[0], None
        elif target in (aten.index_select.default, aten.gather.default):
            yield args[2], _size(args[0], args[1]), args[0], None
        elif cross_entropy is not None and target is cross_entropy.default:
            # (logits, target, reduction, ignore_index, label_smoothing)
            yield args[1], _size(args[0], -1), None, args[3]
        elif target is aten.nll_loss_forward.default:
            # (input, target, weight, reduction, ignore_index)
            dim = 1 if _size(args[0], 1) is not None else 0
            yield args[1], _size(args[0], dim), None, args[4]


def index_bounds(graph, names, num_data):
    """One entry per data argument of the traced step (placeholders after
    the `names` parameters): None, or {bound, table, ignore} where every use
    agrees (the tightest bound; an ignored value only if every use ignores
    it)."""
    placeholders = [n for n in graph.graph.nodes if n.op == "placeholder"]
    data = {
        p: i
        for i, p in enumerate(placeholders[len(names) :][:num_data])
        if _is_integer(p)
    }
    params = {p: names[i] for i, p in enumerate(placeholders[: len(names)])}
    found = [[] for _ in range(num_data)]
    for index, bound, table, ignore in _uses(graph.graph):
        source = _source(index) if isinstance(index, torch.fx.Node) else None
        if source not in data or not bound:
            continue
        table = params.get(_source(table)) if table is not None else None
        found[data[source]].append((bound, table, ignore))
    return [_combine(uses) if uses else None for uses in found]


def _combine(uses):
    bound, table, _ = min(uses, key=lambda use: (use[0], use[1] is None))
    ignores = {use[2] for use in uses}
    ignore = ignores.pop() if len(ignores) == 1 else None
    return {"bound": bound, "table": table, "ignore": ignore}
