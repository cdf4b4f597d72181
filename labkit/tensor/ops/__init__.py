"""Every op of labkit: primitives (one declaration each) and composites built from them."""
import warnings

# log(0) is -inf and 0/0 is NaN, silently, as in PyTorch: NumPy's floating-point warnings raised
# inside labkit's kernels are not shown (an errstate around every kernel would cost microseconds
# per op; the filter costs nothing until a warning fires). Warnings from the user's own NumPy
# code, and labkit's own warnings, are untouched.
warnings.filterwarnings(
    "ignore", r"(divide by zero|invalid value|overflow|underflow) encountered in",
    RuntimeWarning, r"labkit\.")

from . import composite, elementwise, index, linalg, reduce, shape  # noqa: F401  (registers ops)
from . import conv  # noqa: F401,E402
from . import decompositions, einsum, nll, norm, softmax, state  # noqa: F401,E402
from . import scan, sorting, statistics  # noqa: F401,E402
from . import bitwise, elementwise_math  # noqa: F401,E402
from . import layout, scatter  # noqa: F401,E402
from . import loss  # noqa: F401,E402
from . import channel_norm, nn_kernels  # noqa: F401,E402
from . import quantized  # noqa: F401,E402
from . import checks, complex, fft  # noqa: F401,E402
from . import recurrent, recurrent_layer  # noqa: F401,E402
