"""``Linear`` with an int8 weight and a float bias, its input quantized at run time: PyTorch's
``torch.ao.nn.quantized.dynamic.Linear`` (``DynamicQuantizedLinear``).

``y = quantized_linear_dynamic(x, weight_int8, weight_scale) + bias``: the op quantizes ``x`` to
uint8 over the whole tensor, multiplies in integers and scales back to float32, exactly as
ONNX's DynamicQuantizeLinear + MatMulInteger do (see ``labkit.tensor.ops.quantized``). The
weight is quantized once, symmetrically (``quantize_weight``). Its state (``weight_int8``,
``weight_scale``, ``bias_float``) is buffers, so ``state_dict()``, ``lk.save`` / ``lk.load`` and
``to(device)`` carry it; nothing in it is trained.

>>> import labkit as lk
>>> float_layer = lk.nn.Linear(4, 3)
>>> layer = lk.nn.quantized.dynamic.Linear.from_float(float_layer)
>>> layer
DynamicQuantizedLinear(in_features=4, out_features=3, dtype=lk.qint8, qscheme=per_tensor_symmetric)
>>> x = lk.randn(2, 4)
>>> bool((layer(x) - float_layer(x)).abs().max() < 0.05)
True
"""
from ....errors import DTypeError
from ....tensor.creation import ones, zeros
from ....tensor.dtypes import as_dtype, float32, int8
from ....tensor.ops.elementwise import where
from ....tensor.ops.quantized import quantized_linear_dynamic
from ...linear import Linear as FloatLinear
from ...module import Module

# how a weight is quantized: int8, zero point 0, one scale for the whole weight or per row
QSCHEMES = ("per_tensor_symmetric", "per_channel_symmetric")


def check_dtype(dtype, where):
    """``dtype`` as labkit's dtype if it is the one dynamic quantization supports (``lk.qint8``,
    which is ``lk.int8``); else a DTypeError naming ``where`` and what is supported."""
    try:
        d = as_dtype(dtype)
    except DTypeError:
        d = None
    if d is not int8:
        raise DTypeError(
            f"{where}: dtype={dtype!r} is not supported: labkit quantizes dynamically to int8 "
            f"weights only (dtype=lk.qint8, the default), with uint8 activations as ONNX's "
            f"DynamicQuantizeLinear. PyTorch's float16 dynamic quantization is not implemented; "
            f"for float16 weights use model.half().")
    return d


def check_qscheme(qscheme, where):
    if qscheme not in QSCHEMES:
        raise ValueError(f"{where}: qscheme {qscheme!r} is not one labkit has; use "
                         f"'per_tensor_symmetric' (one scale, the default) or "
                         f"'per_channel_symmetric' (one scale per output feature)")
    return qscheme


def quantize_weight(weight, qscheme="per_tensor_symmetric"):
    """A float weight (out_features, in_features) as ``(int8 values, float32 scale)``.

    Symmetric, zero point 0: ``scale = max|w| / 127`` over the whole weight (shape ``()``) or
    over each row (``"per_channel_symmetric"``, shape ``(out_features,)``), in float32; then
    ``q = clip(round(w / scale), -127, 127)``, rounding half to even. Where that max is 0 (an
    all-zero weight, or row) the scale is 1.0: its values are 0 whatever the scale, and nothing
    divides by zero.

    >>> import labkit as lk
    >>> from labkit.nn.quantized.dynamic import quantize_weight
    >>> q, s = quantize_weight(lk.tensor([[0.5, -1.27], [0.0, 0.0]]), "per_channel_symmetric")
    >>> q.tolist(), s.tolist()
    ([[50, -127], [0, 0]], [0.009999999776482582, 1.0])
    """
    per_channel = check_qscheme(qscheme, "quantize_weight") == "per_channel_symmetric"
    w = weight.detach().to(float32)
    rows = (w.shape[0],) if per_channel else ()
    if w.numel() == 0:
        scale = ones(rows, device=w.device)
    else:
        top = w.abs().amax(dim=1) if per_channel else w.abs().max()
        scale = top / 127.0
        scale = where(scale == 0, 1.0, scale)
    divisor = scale.unsqueeze(1) if per_channel else scale
    return (w / divisor).round().clamp(-127, 127).to(int8), scale


class Linear(Module):
    """A Linear layer with an int8 weight (out_features, in_features) and a float32 bias, its
    input quantized to uint8 at run time (PyTorch's dynamic quantized Linear).

    Make one from a trained ``lk.nn.Linear`` with ``from_float``, or for a whole model with
    ``lk.quantization.quantize_dynamic``. As in PyTorch, ``weight()`` and ``bias()`` are methods:
    ``weight()`` gives the dequantized float weight. Inputs are float32 ``(..., in_features)``.
    ``qscheme``: ``"per_tensor_symmetric"`` (default) or ``"per_channel_symmetric"``.

    >>> import labkit as lk
    >>> layer = lk.nn.quantized.dynamic.Linear(3, 2)      # zero weight until loaded
    >>> sorted(layer.state_dict())
    ['bias_float', 'weight_int8', 'weight_scale']
    >>> layer(lk.ones(5, 3)).shape
    (5, 2)
    """

    _FLOAT_MODULE = FloatLinear

    def __init__(self, in_features, out_features, bias_=True, dtype=int8, *,
                 qscheme="per_tensor_symmetric", device=None):
        super().__init__()
        check_dtype(dtype, "lk.nn.quantized.dynamic.Linear")
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        self.qscheme = check_qscheme(qscheme, "lk.nn.quantized.dynamic.Linear")
        rows = (self.out_features,) if qscheme == "per_channel_symmetric" else ()
        self.register_buffer("weight_int8", zeros((self.out_features, self.in_features),
                                                  dtype=int8, device=device))
        self.register_buffer("weight_scale", ones(rows, dtype=float32, device=device))
        self.register_buffer("bias_float", zeros((self.out_features,), dtype=float32,
                                                 device=device) if bias_ else None)

    @classmethod
    def from_float(cls, mod, *, qscheme=None):
        """This layer from a float ``lk.nn.Linear``: its weight quantized (``quantize_weight``),
        its bias copied as float32. ``qscheme`` defaults to the one ``mod.qconfig`` asks for
        (``lk.quantization.per_channel_dynamic_qconfig``...), else per tensor."""
        if not isinstance(mod, FloatLinear):
            raise TypeError(f"lk.nn.quantized.dynamic.Linear.from_float needs an lk.nn.Linear, "
                            f"got {type(mod).__name__}")
        if qscheme is None:
            qscheme = getattr(getattr(mod, "qconfig", None), "weight", None) or QSCHEMES[0]
        q, scale = quantize_weight(mod.weight, qscheme)
        new = cls(mod.in_features, mod.out_features, mod.bias is not None, qscheme=qscheme,
                  device=mod.weight.device)
        new.weight_int8, new.weight_scale = q, scale
        if mod.bias is not None:
            new.bias_float = mod.bias.detach().to(float32).clone()
        return new

    def forward(self, input):
        y = quantized_linear_dynamic(input, self.weight_int8, self.weight_scale)
        return y if self.bias_float is None else y + self.bias_float

    def weight(self):
        """The weight as float32 values, ``weight_int8 * scale`` (what the layer computes with)."""
        scale = self.weight_scale
        return self.weight_int8.to(float32) * (scale.unsqueeze(1) if scale.ndim else scale)

    def bias(self):
        """The float32 bias (None if the layer has none)."""
        return self.bias_float

    def _get_name(self):
        return "DynamicQuantizedLinear"

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"dtype=lk.qint8, qscheme={self.qscheme}")
