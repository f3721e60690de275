"""zest-import: a PyTorch model's training step as Zest contract IR.

The step is traced as PyTorch computes it: ``grad_and_value`` of the loss
over the trainable parameters, through ``functional_call``, functionalized
(in-place ops removed) and decomposed with torch-mlir's table, then imported
by torch-mlir to linalg on tensors. The result is annotated with the model
contract (docs/Contract.md): ``zest.param`` on every parameter argument
(``named_parameters()`` names, tied weights once), ``zest.grad`` on the
gradient of each trainable one, ``zest.loss`` on the loss, and the module
attribute ``zest.module_classes`` from ``named_modules()`` so that
``zestc --leaf-classes=<Class>`` works on the imported model.
"""

import importlib

__all__ = [
    "ZestImportError",
    "check_factory",
    "check_supported",
    "import_model",
    "load_factory_shapes",
    "load_factory",
    "run_command",
    "user_sources",
]


def __getattr__(name):
    """The API from importer.py, loaded on first use: `zest` and the
    submodules that need no tracing (errors) start without PyTorch."""
    if name in __all__:
        return getattr(importlib.import_module(".importer", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
