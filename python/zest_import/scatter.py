"""torch-mlir's scatter (``tm_tensor.scatter``) as a loop of upstream ops.

torch-mlir lowers the backward of ``embedding`` (and ``index_put`` /
``scatter_add``; ``nll_loss``'s has a decomposition of its own) to
``tm_tensor.scatter``, a dialect Zest does not know. Each scatter becomes
an ``scf.for`` over its N updates that
reads the addressed slice of the accumulator, combines the update into it
(assignment or addition: the combiners torch-mlir emits) and inserts it
back: N slice reads and writes, O(N x slice), where a one-hot product would
cost N x rows x slice.
"""

from torch_mlir import ir
from torch_mlir.dialects import arith, linalg, scf, tensor


class ScatterError(Exception):
    pass


def _combiner(op):
    """'assign' or 'add', from the scatter's region: (update, current)."""
    body = op.regions[0].blocks[0]
    ops = list(body.operations)
    update, current = body.arguments[0], body.arguments[1]
    if len(ops) == 1 and ops[0].operands[0] == update:
        return "assign"
    if (
        len(ops) == 2
        and ops[0].operation.name == "arith.addf"
        and set(ops[0].operands) == {update, current}
        and ops[1].operands[0] == ops[0].results[0]
    ):
        return "add"
    raise ScatterError(
        "a tm_tensor.scatter whose combiner is neither an assignment nor an addition"
    )


def _index(value):
    return arith.constant(ir.IndexType.get(), value)


def _lower(op):
    updates, indices, original = op.operands[0], op.operands[1], op.operands[2]
    dims = list(ir.DenseI64ArrayAttr(op.attributes["dimension_map"]))
    combine = _combiner(op)
    shape = ir.RankedTensorType(original.type).shape
    update_shape = ir.RankedTensorType(updates.type).shape
    element = ir.RankedTensorType(original.type).element_type
    count = update_shape[0]
    # The slice an update covers: every dimension not indexed.
    slice_shape = [size for d, size in enumerate(shape) if d not in dims]
    loop = scf.ForOp(_index(0), _index(count), _index(1), [original])
    with ir.InsertionPoint(loop.body):
        i = loop.induction_variable
        acc = loop.inner_iter_args[0]
        position = [None] * len(shape)
        for k, d in enumerate(dims):
            raw = tensor.extract(indices, [i, _index(k)])
            position[d] = arith.index_cast(ir.IndexType.get(), raw)
        if not slice_shape:
            update = tensor.extract(
                updates, [i] + [_index(0)] * (len(update_shape) - 1)
            )
            if combine == "add":
                update = arith.addf(tensor.extract(acc, position), update)
            result = tensor.insert(update, acc, position)
        else:
            dynamic = ir.ShapedType.get_dynamic_size()
            offsets = [dynamic if p is not None else 0 for p in position]
            sizes = [1 if p is not None else size for p, size in zip(position, shape)]
            ones = [1] * len(shape)
            slice_type = ir.RankedTensorType.get(slice_shape, element)
            dynamic_offsets = [p for p in position if p is not None]
            current = tensor.extract_slice(
                slice_type, acc, dynamic_offsets, [], [], offsets, sizes, ones
            )
            update_sizes = [1] + update_shape[1:]
            update = tensor.extract_slice(
                slice_type,
                updates,
                [i],
                [],
                [],
                [dynamic] + [0] * (len(update_shape) - 1),
                update_sizes,
                [1] * len(update_shape),
            )
            if combine == "add":
                update = linalg.add(current, update, outs=[current])
            result = tensor.insert_slice(
                update, acc, dynamic_offsets, [], [], offsets, sizes, ones
            )
        scf.YieldOp([result])
    return loop.results[0]


def lower_scatters(module):
    """Replaces every tm_tensor.scatter of `module` in place."""
    scatters = []

    def collect(op):
        if op.operation.name == "tm_tensor.scatter":
            scatters.append(op.operation)
        return ir.WalkResult.ADVANCE

    with module.context:
        module.operation.walk(collect)
        for op in scatters:
            if len(op.operands) != 3:
                raise ScatterError(
                    f"a tm_tensor.scatter with {len(op.operands)} operands"
                )
            with ir.InsertionPoint(op), op.location:
                replacement = _lower(op)
            op.results[0].replace_all_uses_with(replacement)
            op.erase()
