"""zest-import's errors: what a model zest-import cannot import is a
ZestImportError whose message says what and where (the module path and
class, the source line), and the command line prints it as "prog: error:"
with exit status 1."""

import sys


class ZestImportError(Exception):
    """A model zest-import cannot turn into contract IR; the message says
    what and where."""


def run_command(prog, commands, args):
    """Runs subcommand `args.command` of `commands`; an ZestImportError becomes
    "prog: error: ..." and exit status 1."""
    try:
        commands[args.command](args)
    except ZestImportError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 1
    return 0


def located(error):
    """'Type: message (at FILE:LINE)' for an exception from user code."""
    import traceback

    frames = traceback.extract_tb(error.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(error).__name__}: {error}{where}"


def first_line(error):
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def is_data_dependent(error):
    """make_fx failed on a branch on a tensor's value (masking code that
    checks whether a mask is all ones, say)."""
    text = f"{type(error).__name__}: {error}"
    return (
        "_local_scalar_dense" in text
        or "DataDependent" in text
        or "data-dependent" in text
    )


def module_path(model, frames):
    """'path' (Class) of the innermost module of `model` whose forward is
    among `frames` (innermost last), or None."""
    paths = {id(module): path for path, module in model.named_modules()}
    for frame in reversed(frames):
        owner = frame.f_locals.get("self")
        if owner is not None and id(owner) in paths:
            path = paths[id(owner)] or "<root>"
            return f"'{path}' ({type(owner).__name__})"
    return None


def stack_frames():
    import inspect

    return [info.frame for info in reversed(inspect.stack())]


def traceback_frames(error):
    frames, tb = [], error.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return frames


def where(model, frames):
    path = module_path(model, frames)
    return f" in module {path}" if path else ""


def unlowered_op(diagnostics, graph, model):
    """The op torch-mlir could not lower, named from its diagnostics, with
    the module and source line of the first node of `graph` calling it."""
    import re

    match = re.search(r'name = "torch\.(aten\.[\w.]+)"', diagnostics) or re.search(
        r"'torch\.(aten\.[\w.]+)'", diagnostics
    )
    if not match:
        lines = diagnostics.strip().splitlines()
        return lines[0] if lines else "unknown failure"
    op = match.group(1)
    return f"no lowering for {op}{origin(graph, op, model)}"


def module_at(model, path, line):
    """'path' (Class) of the innermost module of `model` whose class's
    forward spans FILE:LINE, or None."""
    import inspect

    best = None
    for name, module in model.named_modules():
        forward = getattr(type(module), "forward", None)
        code = getattr(forward, "__code__", None)
        if code is None or code.co_filename != path:
            continue
        try:
            lines, first = inspect.getsourcelines(forward)
        except (OSError, TypeError):
            continue
        if first <= line < first + len(lines) and (
            best is None or len(name) > len(best[0])
        ):
            best = (name, module)
    if best is None:
        return None
    return f"'{best[0] or '<root>'}' ({type(best[1]).__name__})"


def origin(graph, op, model):
    """' in module 'path' (Class) at FILE:LINE' for the first node of `graph`
    calling `op` (aten.name or aten.name.overload), from the stack trace
    make_fx recorded and the model's forward methods; '' if unknown."""
    import re

    for node in graph.graph.nodes:
        target = str(node.target)
        if node.op != "call_function" or not (
            target == op or target.startswith(op + ".")
        ):
            continue
        frames = re.findall(
            r'File "([^"]+)", line (\d+)', node.meta.get("stack_trace") or ""
        )
        user = [
            f
            for f in frames
            if "/site-packages/" not in f[0] and "/zest_import/" not in f[0]
        ]
        if not user:
            return ""
        path, line = user[-1][0], int(user[-1][1])
        module = module_at(model, path, line)
        return (f" in module {module}" if module else "") + f" at {path}:{line}"
    return ""
