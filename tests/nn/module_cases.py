"""One case per ``lk.nn`` module: how to build it (the same arguments for labkit and PyTorch),
what to feed it, and in which mode; ``test_modules_against_torch.py`` derives the checks.

A case is ``ModuleCase(name, build, inputs, ...)``:

- ``build(nn)`` makes the module from a namespace ``nn`` that is ``labkit.nn`` or ``torch.nn``
  (so one lambda states both): ``lambda nn: nn.Conv2d(3, 4, 3, padding="same")``;
- ``inputs(rng)`` gives NumPy arrays (float arrays become float64 tensors; int arrays stay
  ints) or a tuple of them; Python values are passed as they are;
- ``module`` names the ``lk.nn`` class the case covers (default: the class ``build`` made), so
  the walk over ``lk.nn``'s classes finds every class covered.

The harness builds PyTorch's module (seeded), copies its ``state_dict`` into labkit's (which
checks the key names and shapes match PyTorch's), runs both in float64 on the same inputs in
``train`` or ``eval`` mode, and compares outputs, the gradients of every parameter and float
input for the same random cotangent, and the buffers after the call (running statistics).

Families of modules keep their cases in ``tests/nn/cases/<family>.py`` as ``MODULE_CASES``.
"""
import importlib
import pkgutil
from dataclasses import dataclass, field

import numpy as np


@dataclass
class ModuleCase:
    name: str
    build: object                 # build(nn) -> module, for nn in (labkit.nn, torch.nn)
    inputs: object                # inputs(rng) -> array or tuple of arrays / Python values
    module: str = None            # the lk.nn class covered (default: type of build(lk.nn))
    train: bool = True            # module.train() (True) or module.eval() before the call
    kwargs: dict = field(default_factory=dict)   # keyword arguments of the call
    rtol: float = 1e-7
    atol: float = 1e-9
    grad: bool = True             # compare gradients too
    output: object = None         # output(result) -> tensor(s) to compare (default: all)

    def __repr__(self):
        return self.name


def normal(shape):
    return lambda rng: rng.standard_normal(shape)


def ints(shape, high):
    return lambda rng: rng.integers(0, high, shape)


def collected():
    """Every ``MODULE_CASES`` of ``tests/nn/cases/``, by module name."""
    from . import cases
    found = []
    for info in sorted(pkgutil.iter_modules(cases.__path__), key=lambda m: m.name):
        found += getattr(importlib.import_module(f"{cases.__name__}.{info.name}"),
                         "MODULE_CASES", [])
    return found
