"""Every public function of the tensor layer in PyTorch's signature (see ``registry.py``).

One module per family, named as in ``labkit/tensor/ops``; importing a module registers its
functions. ``labkit/tensor/methods.py`` attaches the methods; ``labkit.tensor`` exports the rest.
"""
from .registry import METHODS, PUBLIC, public, tensor_method  # noqa: F401
from . import linalg, products, reductions  # noqa: F401,E402
