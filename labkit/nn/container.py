"""Containers: ``Sequential`` (a chain of layers) and ``ModuleList`` (a list of layers)."""
from .module import Module


def _check_module(obj, where):
    if not isinstance(obj, Module):
        raise TypeError(f"{where}: {type(obj).__name__} is not an lk.nn.Module (got {obj!r}); "
                        f"wrap plain functions in a Module subclass")
    return obj


class Sequential(Module):
    """Layers applied one after another; ``Sequential(a, b)(x)`` is ``b(a(x))``.

    Layers are named '0', '1', ... (or by the keys of a dict passed as the only argument).

    >>> import labkit as lk
    >>> net = lk.nn.Sequential(lk.nn.Linear(4, 8), lk.nn.ReLU(), lk.nn.Linear(8, 2))
    >>> net(lk.ones(5, 4)).shape
    (5, 2)
    >>> net[0]
    Linear(in_features=4, out_features=8, bias=True)
    """

    def __init__(self, *layers):
        super().__init__()
        if len(layers) == 1 and isinstance(layers[0], dict):
            for name, layer in layers[0].items():
                self.add_module(str(name), _check_module(layer, "Sequential"))
        else:
            for i, layer in enumerate(layers):
                self.add_module(str(i), _check_module(layer, "Sequential"))

    def __getitem__(self, index):
        layers = list(self._modules.values())
        if isinstance(index, slice):
            return Sequential(dict(list(self._modules.items())[index]))
        return layers[index]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, layer):
        """Add ``layer`` at the end; returns self."""
        self.add_module(str(len(self)), _check_module(layer, "Sequential.append"))
        return self

    def forward(self, x):
        for layer in self._modules.values():
            x = layer(x)
        return x


class ModuleList(Module):
    """A list of modules whose parameters are registered (a plain Python list's would not be).

    >>> import labkit as lk
    >>> blocks = lk.nn.ModuleList([lk.nn.Linear(2, 2) for _ in range(3)])
    >>> len(list(blocks.parameters()))
    6
    """

    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def __getitem__(self, index):
        items = list(self._modules.values())
        if isinstance(index, slice):
            return ModuleList(items[index])
        return items[index]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        """Add ``module`` at the end; returns self."""
        self.add_module(str(len(self)), _check_module(module, "ModuleList.append"))
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self
