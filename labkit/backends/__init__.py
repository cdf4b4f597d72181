"""``torch.backends``: what PyTorch programs ask of their backends. labkit runs on NumPy (CPU) and
CuPy (CUDA GPUs), so there is no MPS backend, and cuDNN's and CUDA matmul's switches
(``cudnn.benchmark``, ``cuda.matmul.allow_tf32``) are accepted and change nothing.

>>> import labkit as lk
>>> lk.backends.mps.is_available()
False
>>> lk.backends.cudnn.benchmark = True      # accepted, as in PyTorch; labkit has no autotuner
"""
from . import cuda, cudnn, mps

__all__ = ["cuda", "cudnn", "mps"]
