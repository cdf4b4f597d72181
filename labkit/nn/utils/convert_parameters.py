"""All parameters as one flat vector, and back."""
from ...autodiff import no_grad
from ...errors import ShapeError, describe
from ...tensor.ops.shape import concat, reshape
from ...tensor.tensor import Tensor


def _check_devices(params, name):
    first = params[0].device if params else None
    for p in params:
        if p.device is not first:
            raise ShapeError(f"{name}: the parameters are on several devices ({first.name} and "
                             f"{p.device.name}); move the model to one device first")


def parameters_to_vector(parameters):
    """The parameters flattened and concatenated into one vector (differentiable).

    >>> import labkit as lk
    >>> lk.nn.utils.parameters_to_vector([lk.ones(2, 2), lk.zeros(1)]).tolist()
    [1.0, 1.0, 1.0, 1.0, 0.0]
    """
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    _check_devices(params, "parameters_to_vector")
    return concat(*[reshape(p, shape=(p.numel(),)) for p in params], dim=0)


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of the vector ``vec`` into the parameters, in place.

    >>> import labkit as lk
    >>> a, b = lk.nn.Parameter(lk.zeros(2)), lk.nn.Parameter(lk.zeros(1))
    >>> lk.nn.utils.vector_to_parameters(lk.tensor([1.0, 2.0, 3.0]), [a, b])
    >>> a.tolist(), b.tolist()
    ([1.0, 2.0], [3.0])
    """
    if not isinstance(vec, Tensor):
        raise TypeError(f"vector_to_parameters expects a tensor for vec, but got "
                        f"{type(vec).__name__}")
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    total = sum(p.numel() for p in params)
    if vec.ndim != 1 or vec.shape[0] != total:
        raise ShapeError(f"vector_to_parameters: vec {describe(vec)} must be a vector of "
                         f"{total} elements, one per parameter entry")
    offset = 0
    with no_grad():
        for p in params:
            n = p.numel()
            p.assign(reshape(vec[offset:offset + n], shape=p.shape))
            offset += n
