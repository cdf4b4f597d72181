"""``torch.backends.cuda``: the switches PyTorch programs set for CUDA matrix products.

``matmul.allow_tf32`` (and ``lk.set_float32_matmul_precision('high')``, which is the same
switch) lets PyTorch run float32 matmuls on a GPU in TensorFloat-32. labkit accepts the
settings and keeps them, but runs float32 products in full float32 precision everywhere: on the
CPU there is no TF32, and on a GPU CuPy's default is full precision. So the switches never
change a result; mixed precision is ``lk.autocast``'s job.

>>> import labkit as lk
>>> lk.backends.cuda.matmul.allow_tf32 = True      # as nanoGPT does
>>> lk.get_float32_matmul_precision()
'high'
>>> lk.set_float32_matmul_precision("highest"); lk.backends.cuda.matmul.allow_tf32
False
"""
_PRECISIONS = ("highest", "high", "medium")
_precision = ["highest"]     # PyTorch's default


def set_float32_matmul_precision(precision):
    """PyTorch's ``torch.set_float32_matmul_precision``: 'highest', 'high' or 'medium'. Kept and
    reported; labkit's float32 matmuls run in full precision whatever it says."""
    if precision not in _PRECISIONS:
        raise ValueError(f"set_float32_matmul_precision: {precision!r} is not one of "
                         f"{', '.join(map(repr, _PRECISIONS))}")
    _precision[0] = precision


def get_float32_matmul_precision():
    """The value last given to ``set_float32_matmul_precision`` ('highest' unless set)."""
    return _precision[0]


class _Matmul:
    """``torch.backends.cuda.matmul``: TF32 and reduced-precision-reduction switches."""

    allow_fp16_reduced_precision_reduction = True
    allow_bf16_reduced_precision_reduction = True

    @property
    def allow_tf32(self):
        return _precision[0] != "highest"

    @allow_tf32.setter
    def allow_tf32(self, flag):
        _precision[0] = "high" if flag else "highest"


matmul = _Matmul()


def is_built():
    """Whether labkit can run on CUDA GPUs: True (through CuPy, when it is installed)."""
    return True
