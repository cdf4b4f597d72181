"""Every public function of the tensor layer in PyTorch's signature (see ``registry.py``).

One module per family, named as in ``labkit/tensor/ops`` (``shape``, ``index``, ``reduce``,
``scan``, ``sorting``...; ``products`` spells ``ops/linalg``'s matmul and ``ops/einsum``, and
``linalg`` the norms and decompositions of ``ops/norm`` and ``ops/decompositions``, as
``torch.linalg`` does); importing a module registers its functions. ``labkit/tensor/methods.py``
attaches the methods; ``labkit.tensor`` exports the rest.
"""
from .registry import METHODS, PUBLIC, public, tensor_method  # noqa: F401
from . import comparisons  # noqa: F401,E402
from . import conversions  # noqa: F401,E402
from . import elementwise_math  # noqa: F401,E402
from . import index  # noqa: F401,E402
from . import layout  # noqa: F401,E402
from . import linalg  # noqa: F401,E402
from . import products  # noqa: F401,E402
from . import reduce  # noqa: F401,E402
from . import scan  # noqa: F401,E402
from . import shape  # noqa: F401,E402
from . import sorting  # noqa: F401,E402
from . import statistics  # noqa: F401,E402
from . import inplace  # noqa: F401,E402  (last: it makes x.<name>_ from the methods above)
