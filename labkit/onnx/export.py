"""``lk.onnx.export``: a model or function, captured by ``lk.function``, written as an ONNX model."""
import inspect
import io
import os
import warnings

import numpy as np
import onnx
from onnx import helper

from ..autodiff import no_grad
from ..graph.function import function as _function
from ..tensor.atomic_file import write_atomically
from ..tensor.creation import tensor as _tensor
from ..tensor.tensor import Tensor
from . import ops as _ops  # noqa: F401  (registers the converters)
from .builder import GraphBuilder, Variants, prune, reads, value_info
from .dims import OnnxExportError

DEFAULT_OPSET = 17
PASSES = ["prune", "constant_folding", "cse", "dce"]


def export(model, args, f, *, kwargs=None, input_names=None, output_names=None,
           dynamic_axes=None, opset_version=None, training=False, export_params=True,
           verbose=False, check=True):
    """Write ``model`` (an ``nn.Module`` or a function of tensors) called on ``args`` as an
    ONNX model to ``f`` (a path or a binary file object), as ``torch.onnx.export`` does.

    The call is captured by ``lk.function`` (modules in eval mode unless ``training=True``, no
    gradients) and every node of the graph becomes ONNX ops; parameters are initializers named
    as in the state dict. ``input_names`` / ``output_names`` name the graph's inputs and
    outputs (default: the forward's parameter names, ``output`` / ``output_0``...).
    ``dynamic_axes`` maps an input or output name to the axes whose size may vary, as a list
    of axes or a dict ``{axis: name}``; the program is traced once more per dynamic axis to
    see which sizes follow it. ``opset_version`` defaults to 17. Returns the ``onnx.ModelProto``
    (checked by ``onnx.checker``).

    >>> import io, labkit as lk
    >>> model = lk.nn.Sequential(lk.nn.Linear(3, 2), lk.nn.ReLU())
    >>> proto = lk.onnx.export(model, (lk.randn(4, 3),), io.BytesIO(), input_names=["x"],
    ...                        dynamic_axes={"x": {0: "batch"}})
    >>> [n.op_type for n in proto.graph.node]
    ['Gemm', 'Add', 'Relu', 'Identity']
    """
    opset = DEFAULT_OPSET if opset_version is None else int(opset_version)
    if opset < 17:
        raise OnnxExportError(f"lk.onnx.export: opset_version={opset}; labkit writes opset 17 "
                              f"or newer (LayerNormalization, Trilu, Reduce ops with axes as "
                              f"inputs)")
    if not export_params:
        raise OnnxExportError("lk.onnx.export: export_params=False is not supported; the "
                              "parameters are written into the model as initializers")
    args = (args,) if isinstance(args, Tensor) else tuple(args)
    kwargs = dict(kwargs or {})
    if args and isinstance(args[-1], dict) and not kwargs:     # torch's (x, {"kw": v}) form
        args, kwargs = args[:-1], dict(args[-1])
    leaves = [a for a in args if isinstance(a, Tensor)]
    names = _input_names(model, args, input_names)
    axes = _dynamic_axes(dynamic_axes, names, output_names)

    modes = _set_training(model, training)
    try:
        fn = _function(lambda *a: model(*a, **kwargs),
                       name=getattr(type(model), "__name__", None) if _is_module(model)
                       else getattr(model, "__name__", "model"))
        symbols = sorted({s for n in names for s in axes.get(n, {}).values()})
        runs = [args]
        sizes = [[_symbol_size(s, args, names, axes) for s in symbols]]
        for j, s in enumerate(symbols):
            for size in _other_sizes(sizes[0][j]):
                runs.append(_resized(args, names, axes, s, size))
                sizes.append([size if k == j else sizes[0][k] for k in range(len(symbols))])
        with no_grad(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", "lk.function .* has been traced")  # on purpose
            graphs = [fn.graph(*a, passes=PASSES) for a in runs]
        traces = fn.traces
    finally:
        _restore_training(modes)

    graph = graphs[0]
    variants = Variants(symbols, sizes)
    variants.pair(graphs)
    trace = traces[0]
    by_name = {n.name: n for n in graph.nodes}
    feeds = [by_name[n.name] for n in trace.raw_feeds]
    outputs = list(graph.outputs)
    out_names = _output_names(output_names, len(outputs))

    b = GraphBuilder(opset, variants)
    inputs = []
    for node, name, leaf in zip(feeds, names, leaves):
        spec = axes.get(name, {})
        b.root.taken.add(name)
        b.values[node] = name
        for axis, symbol in spec.items():
            b.symbol_values.setdefault(symbol, (name, axis))
        inputs.append(value_info(name, node.dtype, [spec.get(k, d) for k, d in
                                                    enumerate(node.shape)]))
    b.convert_all(graph.nodes)
    out_infos = []
    for node, name in zip(outputs, out_names):
        b.root.taken.add(name)
        b.emit("Identity", [b.value(node)], name=name)
        b.nodes[-1].output[0] = name
        out_infos.append(value_info(name, node.dtype, b.dims(node)))
    nodes = prune(b.nodes, [i.name for i in out_infos])
    used = reads(nodes)
    inits = [t for t in b.initializers if t.name in used]
    proto = helper.make_graph(nodes, graph.name.split("#")[0] or "labkit", inputs, out_infos,
                              initializer=inits)
    model_proto = helper.make_model(proto, opset_imports=[helper.make_opsetid("", opset)],
                                    producer_name="labkit", producer_version=_version())
    model_proto.ir_version = min(model_proto.ir_version, 10)
    if check:
        onnx.checker.check_model(model_proto, full_check=True)
    data = model_proto.SerializeToString()
    if verbose:
        print(helper.printable_graph(model_proto.graph))
    if isinstance(f, (str, bytes, os.PathLike)):
        write_atomically(os.fsdecode(f), lambda tmp: open(tmp, "wb").write(data))
    elif isinstance(f, io.IOBase) or hasattr(f, "write"):
        f.write(data)
    else:
        raise TypeError(f"lk.onnx.export writes to a path or a binary file object, got "
                        f"{type(f).__name__}")
    return model_proto


def _version():
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("labkit")
    except PackageNotFoundError:
        return "0"


def _is_module(model):
    return hasattr(model, "training") and hasattr(model, "modules") and hasattr(model, "eval")


def _set_training(model, training):
    """Put the model's modules in eval (or train) mode for the export; returns their modes."""
    if not _is_module(model):
        return []
    modes = [(m, m.training) for m in model.modules()]
    model.train(bool(training))
    return modes


def _restore_training(modes):
    for m, was in modes:
        m.training = was


def _input_names(model, args, given):
    n = sum(isinstance(a, Tensor) for a in args)
    if given is not None:
        given = list(given)
        if len(given) != n:
            raise OnnxExportError(f"lk.onnx.export: input_names has {len(given)} names for "
                                  f"{n} tensor arguments")
        return given
    fn = model.forward if _is_module(model) else model
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = [params[k] if k < len(params) else f"input_{k}"
             for k, a in enumerate(args) if isinstance(a, Tensor)]
    return names if len(set(names)) == len(names) else [f"input_{k}" for k in range(n)]


def _output_names(given, n):
    if given is None:
        return ["output"] if n == 1 else [f"output_{k}" for k in range(n)]
    given = list(given)
    if len(given) < n:
        given += [f"output_{k}" for k in range(len(given), n)]
    return given[:n]


def _dynamic_axes(dynamic_axes, names, output_names):
    """``{value name: {axis: symbol}}`` from torch's forms (lists of axes, or dicts)."""
    out = {}
    known = set(names) | set(output_names or ())
    for name, spec in (dynamic_axes or {}).items():
        if name not in known and not name.startswith("output"):
            raise OnnxExportError(f"lk.onnx.export: dynamic_axes names {name!r}, which is "
                                  f"neither an input ({', '.join(names)}) nor an output name")
        if isinstance(spec, dict):
            out[name] = {int(k): str(v) for k, v in spec.items()}
        else:
            out[name] = {int(k): f"{name}_dynamic_axes_{i + 1}" for i, k in enumerate(spec)}
    return out


def _symbol_size(symbol, args, names, axes):
    sizes = set()
    tensors = [a for a in args if isinstance(a, Tensor)]
    for name, t in zip(names, tensors):
        for axis, s in axes.get(name, {}).items():
            if s == symbol:
                if not -t.ndim <= axis < t.ndim:
                    raise OnnxExportError(f"lk.onnx.export: dynamic axis {axis} of input "
                                          f"{name!r}, which has shape {tuple(t.shape)}")
                sizes.add(t.shape[axis])
    if len(sizes) != 1:
        raise OnnxExportError(f"lk.onnx.export: the dynamic axis {symbol!r} has sizes "
                              f"{sorted(sizes)} in the example inputs; one name, one size")
    return sizes.pop()


def _other_sizes(size):
    """Two more sizes to trace a dynamic axis at: smaller where the axis allows (a sequence
    may not outgrow a model's context), never 1 (where broadcasting would change the program)."""
    return (size - 1, size - 2) if size >= 4 else (size + 1, size + 2)


def _resized(args, names, axes, symbol, new):
    """``args`` with every input axis named ``symbol`` resized to ``new`` (values repeated)."""
    out, names_iter = [], iter(names)
    for a in args:
        if not isinstance(a, Tensor):
            out.append(a)
            continue
        name = next(names_iter)
        array = a.detach().cpu().numpy()
        for axis, s in axes.get(name, {}).items():
            if s == symbol:
                idx = np.arange(new) % array.shape[axis]
                array = np.take(array, idx, axis=axis)
        out.append(_tensor(array, dtype=a.dtype, device=a.device))
    return tuple(out)
