"""The model contract on a traced module (docs/Contract.md): ``zest.param``
on the parameter arguments, ``zest.index_bound`` on data arguments that
index a table, ``zest.grad`` and ``zest.loss`` on the results, ``zest.rng``
on the random streams, ``zest.module_classes`` on the module."""


def data_attrs(ir, bounds):
    """The data arguments' attributes: {zest.index_bound = {...}} for those
    that index a table (`bounds`: indices.index_bounds), else none."""
    i64 = ir.IntegerType.get_signless(64)
    attrs = []
    for bound in bounds:
        if bound is None:
            attrs.append(ir.DictAttr.get({}))
            continue
        fields = {"bound": ir.IntegerAttr.get(i64, bound["bound"])}
        if bound["table"]:
            fields["table"] = ir.StringAttr.get(bound["table"])
        if bound["ignore"] is not None:
            fields["ignore"] = ir.IntegerAttr.get(i64, bound["ignore"])
        attrs.append(ir.DictAttr.get({"zest.index_bound": ir.DictAttr.get(fields)}))
    return attrs


def annotate(mlir, model, names, trained, bounds, name, random):
    """Adds the model contract's attributes; returns the module's text."""
    from torch_mlir import ir

    with mlir.context:
        funcs = [op for op in mlir.body.operations if op.operation.name == "func.func"]
        func = next(
            f for f in funcs if ir.StringAttr(f.attributes["sym_name"]).value == name
        )
        args = [ir.DictAttr.get({"zest.param": ir.StringAttr.get(n)}) for n in names]
        args += data_attrs(ir, bounds)
        if random:
            args.append(ir.DictAttr.get({"zest.rng": ir.UnitAttr.get()}))
        func.attributes["arg_attrs"] = ir.ArrayAttr.get(args)
        results = [ir.DictAttr.get({"zest.loss": ir.UnitAttr.get()})]
        results += [
            ir.DictAttr.get({"zest.grad": ir.StringAttr.get(n)}) for n in trained
        ]
        func.attributes["res_attrs"] = ir.ArrayAttr.get(results)
        classes = {
            path: ir.StringAttr.get(type(module).__name__)
            for path, module in model.named_modules()
            if path
        }
        mlir.operation.attributes["zest.module_classes"] = ir.DictAttr.get(classes)
    return str(mlir)


def merge_forward(mlir, forward, model, names, bounds, name):
    """Moves the forward entry `name` of module `forward` into `mlir`,
    annotated: parameters by FQN, the loss as a plain output (an entry
    without `zest.loss` runs forward only)."""
    from torch_mlir import ir

    with mlir.context:
        parsed = ir.Module.parse(str(forward))
        for op in list(parsed.body.operations):
            if op.operation.name != "func.func":
                continue
            if ir.StringAttr(op.attributes["sym_name"]).value == name:
                args = [
                    ir.DictAttr.get({"zest.param": ir.StringAttr.get(n)}) for n in names
                ]
                args += data_attrs(ir, bounds)
                op.attributes["arg_attrs"] = ir.ArrayAttr.get(args)
            mlir.body.append(op.operation)


def entry_name(model):
    """The default entry point's name: the model's class in snake case
    (LlamaForCausalLM -> llama_for_causal_lm)."""
    import re

    words = re.sub(
        r"([a-z0-9])([A-Z])",
        r"\1_\2",
        re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", type(model).__name__),
    )
    name = re.sub(r"\W", "_", words).lower().strip("_") or "model"
    return name if name != "main" else "main_model"
