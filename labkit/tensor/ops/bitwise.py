"""Bitwise ops on integer and bool tensors (no gradient): and, or, xor, not, shifts.

A float input is a DTypeError naming the op (NumPy's ufuncs have no loop for it), as in PyTorch.
"""
import numpy as np

from .elementwise import ufunc_op

bitwise_and = ufunc_op("bitwise_and", np.bitwise_and)
bitwise_or = ufunc_op("bitwise_or", np.bitwise_or)
bitwise_xor = ufunc_op("bitwise_xor", np.bitwise_xor)
bitwise_not = ufunc_op("bitwise_not", np.invert)
# shifts by the width of the type or more give 0 (-1 for a negative value shifted right), as
# in PyTorch; so does a negative shift
bitwise_left_shift = ufunc_op("bitwise_left_shift", np.left_shift)
bitwise_right_shift = ufunc_op("bitwise_right_shift", np.right_shift)
