"""Zest's fused ops through torch-mlir: the ``zest::`` custom ops a trace
records (attention.py) become Zest dialect ops in the imported module.

torch-mlir imports a custom op as ``torch.operator "torch.zest.<name>"``,
which no torch-mlir pass lowers. Before the lowering each one becomes a
call of a private function declaration carrying the op's scalar operands
as attributes; torch-mlir converts the calls' tensor types with the rest of
the module (its last check, which refuses calls, is left out); then each
call becomes the Zest op, with fresh destinations, written in generic form
(the importer's context does not know the dialect; zest-opt and zestc
parse it as the op and verify it).
"""

PREFIX = "torch.zest."
CALLEE_PREFIX = "__zest_"

# The custom ops: their tensor operands (None: an optional one), the scalar
# operands recorded as attributes, and the Zest op each becomes.
OPS = {
    "attention": {
        "tensors": ("query", "key", "value", "mask"),
        "scalars": ("causal", "scale"),
        "zest": "zest.attention",
    },
    "attention_backward": {
        "tensors": (
            "grad_output",
            "query",
            "key",
            "value",
            "output",
            "logsumexp",
            "mask",
        ),
        "scalars": ("causal", "scale"),
        "zest": "zest.attention_backward",
    },
    "cross_entropy": {
        "tensors": ("logits", "target"),
        "scalars": ("reduction", "ignore_index", "label_smoothing"),
        "zest": "zest.cross_entropy",
    },
    "cross_entropy_backward": {
        "tensors": ("grad_loss", "logits", "target", "logsumexp"),
        "scalars": ("reduction", "ignore_index", "label_smoothing"),
        "zest": "zest.cross_entropy_backward",
    },
    "grouped_matmul": {
        "tensors": ("input", "weight", "offsets"),
        "scalars": ("transpose_weight",),
        "zest": "zest.grouped_matmul",
    },
    "grouped_matmul_weight_grad": {
        "tensors": ("input", "grad_output", "offsets"),
        "scalars": ("transpose_weight",),
        "zest": "zest.grouped_matmul_weight_grad",
    },
    "expert_routing": {
        "tensors": ("ends",),
        "scalars": ("group_size",),
        "zest": "zest.expert_routing",
    },
    "expert_dispatch": {
        "tensors": ("input", "ends", "routing"),
        "scalars": ("group_size",),
        "zest": "zest.expert_dispatch",
    },
    "expert_combine": {
        "tensors": ("input", "ends", "routing"),
        "scalars": ("group_size",),
        "zest": "zest.expert_combine",
    },
}

# Scalars that are flags: a unit attribute when true, absent when false.
_FLAGS = ("causal", "transpose_weight")

_CONTRACT_CHECK = "torch-verify-linalg-on-tensors-backend-contract"


def _ops_named(module, name, predicate):
    from torch_mlir import ir

    found = []

    def visit(op):
        if op.operation.name == name and predicate(op.operation):
            found.append(op.operation)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def _custom_op_name(op):
    from torch_mlir import ir

    name = ir.StringAttr(op.attributes["name"]).value
    return name[len(PREFIX) :] if name.startswith(PREFIX) else None


def _scalar_attribute(value, name):
    """The attribute a constant scalar operand becomes: a unit attribute for
    a true bool (absent when false), an i32 for the reduction (Zest's
    LossReduction, ATen's values), an i64 for an index, an f32 for a
    float."""
    from torch_mlir import ir

    owner = value.owner
    if name in _FLAGS:
        return (
            ir.UnitAttr.get() if ir.BoolAttr(owner.attributes["value"]).value else None
        )
    if name in ("reduction", "ignore_index", "group_size"):
        number = ir.IntegerAttr(owner.attributes["value"]).value
        bits = 32 if name == "reduction" else 64
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(bits), number)
    return ir.FloatAttr.get_f32(ir.FloatAttr(owner.attributes["value"]).value)


def custom_ops_to_calls(module):
    """Each torch.operator "torch.zest.<name>" as a call of a private
    declaration @__zest_<name>_<n> whose attributes hold its scalars."""
    from torch_mlir import ir
    from torch_mlir.dialects import func

    ops = _ops_named(module, "torch.operator", lambda op: _custom_op_name(op) in OPS)
    with module.context, ir.Location.unknown():
        for index, op in enumerate(ops):
            name = _custom_op_name(op)
            spec = OPS[name]
            operands = list(op.operands)
            tensors = [
                v
                for v in operands[: len(spec["tensors"])]
                if str(v.type) != "!torch.none"
            ]
            callee = f"{CALLEE_PREFIX}{name}_{index}"
            result_types = [r.type for r in op.results]
            with ir.InsertionPoint(module.body):
                decl = func.FuncOp(
                    callee,
                    ir.FunctionType.get([v.type for v in tensors], result_types),
                    visibility="private",
                )
                decl.attributes["zest.op"] = ir.StringAttr.get(name)
                scalars = operands[len(spec["tensors"]) :]
                for scalar, value in zip(spec["scalars"], scalars):
                    attr = _scalar_attribute(value, scalar)
                    if attr is not None:
                        decl.attributes[scalar] = attr
            with ir.InsertionPoint(op):
                call = func.CallOp(
                    result_types, ir.FlatSymbolRefAttr.get(callee), tensors
                )
            for old, new in zip(op.results, call.results):
                old.replace_all_uses_with(new)
            op.erase()


def linalg_pipeline(context, allow_non_finites=True):
    """torch-mlir's pipeline to linalg on tensors without its last check
    (which refuses the calls of custom_ops_to_calls)."""
    from torch_mlir.passmanager import PassManager

    with context:
        pipeline = str(
            PassManager.parse(
                "builtin.module(torch-backend-to-linalg-on-tensors-backend-"
                f"pipeline{{allow-non-finites={allow_non_finites}}})"
            )
        )
    passes = pipeline.replace("," + _CONTRACT_CHECK, "").replace(_CONTRACT_CHECK, "")
    return passes


def calls_to_zest_ops(module):
    """Each call of a declaration of custom_ops_to_calls as its Zest op, in
    generic form, with fresh (tensor.empty) destinations; the declarations
    go."""
    from torch_mlir import ir

    module.context.allow_unregistered_dialects = True
    calls = _ops_named(
        module,
        "func.call",
        lambda op: ir.FlatSymbolRefAttr(op.attributes["callee"]).value.startswith(
            CALLEE_PREFIX
        ),
    )
    declarations = {}
    for op in module.body.operations:
        if op.operation.name == "func.func":
            declarations[ir.StringAttr(op.attributes["sym_name"]).value] = op
    with module.context, ir.Location.unknown():
        for call in calls:
            decl = declarations[ir.FlatSymbolRefAttr(call.attributes["callee"]).value]
            name = ir.StringAttr(decl.attributes["zest.op"]).value
            attributes = {
                scalar: decl.attributes[scalar]
                for scalar in OPS[name]["scalars"]
                if scalar in decl.attributes
            }
            with ir.InsertionPoint(call), call.location:
                inits = [
                    ir.Operation.create(
                        "tensor.empty", results=[result.type], operands=[]
                    ).result
                    for result in call.results
                ]
                zest_op = ir.Operation.create(
                    OPS[name]["zest"],
                    results=[r.type for r in call.results],
                    operands=list(call.operands) + inits,
                    attributes=attributes,
                )
            for old, new in zip(call.results, zest_op.results):
                old.replace_all_uses_with(new)
            call.erase()
        for decl in declarations.values():
            if "zest.op" in decl.attributes:
                decl.erase()
