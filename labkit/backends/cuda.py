"""``torch.backends.cuda``: the switches PyTorch programs set for CUDA matrix products.

labkit's GPU matrix products are CuPy's (cuBLAS) in full float32, whatever these say: they may be
set as PyTorch programs do (nanoGPT sets ``torch.backends.cuda.matmul.allow_tf32 = True``) and
change nothing.

>>> import labkit as lk
>>> lk.backends.cuda.matmul.allow_tf32 = True      # accepted; labkit does not use TF32
>>> lk.backends.cuda.matmul.allow_tf32
True
"""
import types

matmul = types.SimpleNamespace(allow_tf32=False, allow_fp16_reduced_precision_reduction=True,
                               allow_bf16_reduced_precision_reduction=True)


def is_built():
    """Whether labkit can run on CUDA GPUs here: whether CuPy is installed."""
    import importlib.util
    return importlib.util.find_spec("cupy") is not None
