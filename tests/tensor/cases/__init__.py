"""More op cases, one module per family of ops (``elementwise_math.py``, ``linalg.py``...).

Each module defines ``PRIMITIVE_CASES`` and/or ``COMPOSITE_CASES`` (lists of ``Case``, built
with ``tests/tensor/case_kit.py``); ``collected()`` gathers them for ``op_cases.py``, so a new
family of ops adds a module here and edits nothing else.
"""
import importlib
import pkgutil


def collected():
    """``(primitive_cases, composite_cases)`` from every module of this package, by module name."""
    primitive, composite = [], []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        primitive += getattr(module, "PRIMITIVE_CASES", [])
        composite += getattr(module, "COMPOSITE_CASES", [])
    return primitive, composite
