"""A bad-input fuzzer against PyTorch: random calls of public functions with wrong shapes,
dtypes, sizes, dims, None, strings, NaN/inf, empty and huge inputs. Where PyTorch raises, labkit
must raise too, a ``LabkitError`` that is also the built-in class PyTorch raises (so ``except
RuntimeError`` written for PyTorch still works), naming the function; where PyTorch returns,
labkit must return PyTorch's result (shape, dtype and values). Never an internal error (a bare
NumPy or Python exception) and never silent garbage.

Each function has a valid call and, for each argument, a pool of values to put in its place
(valid ones and bad ones); a drawn call replaces one or two arguments. Hypothesis draws them,
derandomized, so every run makes the same calls (``CALLS`` in all).
"""
import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import labkit as lk
import labkit.nn.functional as LF
import torch.nn.functional as TF

RNG = np.random.default_rng(0)
CALLS_PER_FUNCTION = 30


class T:
    """A tensor argument, made for each library from the same NumPy array."""

    def __init__(self, shape, dtype="float32", fill=None):
        self.shape, self.dtype, self.fill = tuple(shape), dtype, fill

    def array(self):
        if self.fill is not None:
            return np.full(self.shape, self.fill, dtype=self.dtype)
        if self.dtype == "bool":
            return RNG.integers(0, 2, self.shape).astype(bool)
        if np.dtype(self.dtype).kind in "iu":
            return RNG.integers(0, 3, self.shape).astype(self.dtype)
        return RNG.standard_normal(self.shape).astype(self.dtype)

    def __repr__(self):
        fill = f", fill={self.fill}" if self.fill is not None else ""
        return f"T({self.shape}, {self.dtype}{fill})"


def _make(value, lib, arrays):
    if isinstance(value, T):
        key = id(value)
        if key not in arrays:
            arrays[key] = value.array()
        return lib.tensor(arrays[key]) if lib is torch else lk.tensor(arrays[key])
    if isinstance(value, list):
        return [_make(v, lib, arrays) for v in value]
    if isinstance(value, tuple):
        return tuple(_make(v, lib, arrays) for v in value)
    return value


NAN, INF = float("nan"), float("inf")
HUGE = 2 ** 62
# values any argument may be replaced by
ANY = [None, "3", 2.5, NAN, -1, 0, HUGE, [], (), T(()), T((0,)), T((2, 3), "int64"),
       T((2, 3), "bool"), T((4, 5)), T((2, 3), fill=NAN)]
DIMS = [0, 1, -1, 2, -3, 5, 1.0, "1", None, (0, 1), True]
SIZES = [(2, 3), (6,), (-1, 3), (-2, 6), (0, 3), (2.5,), ("3",), (HUGE, HUGE), (-1, -1),
         (7,), 3, -3]
X = T((2, 3))
SQ = T((3, 3))
IDX = T((2, 3), "int64")

# name: (labkit function, torch function, valid arguments, {position: extra values})
SPECS = {
    "zeros": (lk.zeros, torch.zeros, [(2, 3)], {0: SIZES + ["3", 2.5, None, [2, "3"]]}),
    "ones": (lk.ones, torch.ones, [(2, 3)], {0: SIZES}),
    "full": (lk.full, torch.full, [(2, 3), 1.5], {0: SIZES, 1: [None, "a", NAN, INF, True, 7]}),
    "empty": (lambda *a: lk.empty(*a).shape, lambda *a: torch.empty(*a).shape, [(2, 3)],
              {0: SIZES}),
    "eye": (lk.eye, torch.eye, [3], {0: [-1, 0, 2.5, "3", None, HUGE]}),
    "arange": (lk.arange, torch.arange, [0, 5, 1], {0: [NAN, INF, "0", None, 10],
                                                     1: [NAN, INF, -5, 0], 2: [0, -1, NAN, 0.5]}),
    "linspace": (lk.linspace, torch.linspace, [0.0, 1.0, 5], {2: [-1, 0, 2.5, "5", None]}),
    "reshape": (lk.reshape, torch.reshape, [X, (3, 2)], {1: SIZES}),
    "view": (lambda x, s: x.view(s), lambda x, s: x.view(s), [X, (3, 2)], {1: SIZES}),
    "permute": (lk.permute, torch.permute, [X, (1, 0)],
                {1: [(0, 0), (0,), (0, 1, 2), (0, 2), (-1, 0), (1.0, 0), None]}),
    "transpose": (lk.transpose, torch.transpose, [X, 0, 1], {1: DIMS, 2: DIMS}),
    "squeeze": (lk.squeeze, torch.squeeze, [T((2, 1, 3)), 1], {1: DIMS}),
    "unsqueeze": (lk.unsqueeze, torch.unsqueeze, [X, 0], {1: DIMS + [3, -4]}),
    "flatten": (lk.flatten, torch.flatten, [T((2, 3, 4)), 0, -1], {1: DIMS, 2: DIMS}),
    "cat": (lk.cat, torch.cat, [[X, X], 0],
            {0: [[X, T((3, 3))], [X, T((2, 3), "int64")], [], [X, None], X, [T(()), T(())]],
             1: DIMS}),
    "stack": (lk.stack, torch.stack, [[X, X], 0],
              {0: [[X, T((3, 3))], [], [X, None], X], 1: DIMS + [2, -3]}),
    "split": (lk.split, torch.split, [T((10, 3)), [7, 3]],
              {1: [[7, -1], [7, 4], [0, 10], 0, -2, 3, 2.5, "3", None, [5.0, 5]],
               2: DIMS}),
    "chunk": (lk.chunk, torch.chunk, [T((10, 3)), 3], {1: [0, -1, 2.5, "3", None], 2: DIMS}),
    "narrow": (lk.narrow, torch.narrow, [T((10, 3)), 0, 2, 5],
               {1: DIMS, 2: [-1, 11, 20, 2.5, None], 3: [-1, 0, 9, 20, 2.5]}),
    "flip": (lk.flip, torch.flip, [X, (0,)], {1: [(0, 0), (2,), 5, None, (1.0,)]}),
    "roll": (lk.roll, torch.roll, [X, 1, 0], {1: [2.5, "1", None, (1, 2)], 2: DIMS}),
    "expand": (lambda x, *s: x.expand(*s), lambda x, *s: x.expand(*s), [T((1, 3)), 2, 3],
               {1: [-1, -2, 0, 2.5, "2", None], 2: [4, -1, 0]}),
    "repeat": (lambda x, *r: x.repeat(*r), lambda x, *r: x.repeat(*r), [X, 2, 1],
               {1: [-1, 0, 2.5, "2", None], 2: [-1, 0]}),
    "gather": (lk.gather, torch.gather, [X, 1, T((2, 2), "int64", 1)],
               {1: DIMS, 2: [T((2, 2), "int64", -1), T((2, 2), "int64", 3),
                             T((2, 2), "int64", -4), T((2, 2), fill=1.0), T((3, 4), "int64", 0),
                             T((2,), "int64", 0)]}),
    "index_select": (lk.index_select, torch.index_select, [X, 1, T((2,), "int64", 1)],
                     {1: DIMS, 2: [T((2,), "int64", -1), T((2,), "int64", 3), T((2,), fill=1.0),
                                   T((2, 2), "int64", 0), T((0,), "int64")]}),
    "take": (lk.take, torch.take, [X, T((2,), "int64", 1)],
             {1: [T((2,), "int64", 6), T((2,), "int64", -7), T((2,), "int64", -1),
                  T((2,), fill=1.0)]}),
    "masked_fill": (lk.masked_fill, torch.masked_fill, [X, T((2, 3), "bool"), 0.5],
                    {1: [T((2, 3), "int64"), T((3, 3), "bool"), T((3,), "bool")],
                     2: [NAN, None, "a", T((2,))]}),
    "where": (lk.where, torch.where, [T((2, 3), "bool"), X, X],
              {0: [T((2, 3)), T((3, 3), "bool")], 1: [T((3, 2)), 1.0, None]}),
    "sum": (lk.sum, torch.sum, [X, 0], {1: DIMS + [(0, 0), (0, 2)]}),
    "mean": (lk.mean, torch.mean, [X, 0], {0: [IDX], 1: DIMS}),
    "amax": (lk.amax, torch.amax, [X, 0], {0: [T((0, 3))], 1: DIMS + [(0, 0)]}),
    "argmax": (lk.argmax, torch.argmax, [X, 0], {0: [T((0, 3)), T((3, 0))], 1: DIMS}),
    "max": (lambda *a: _values(lk.max(*a)), lambda *a: _values(torch.max(*a)), [X, 0],
            {0: [T((0, 3))], 1: DIMS}),
    "cumsum": (lk.cumsum, torch.cumsum, [X, 0], {1: DIMS}),
    "prod": (lk.prod, torch.prod, [X, 0], {1: DIMS}),
    "softmax": (lk.softmax, torch.softmax, [X, 1], {0: [T(()), IDX], 1: DIMS}),
    "log_softmax": (lk.log_softmax, torch.log_softmax, [X, 1], {0: [T(())], 1: DIMS}),
    "topk": (lambda *a: tuple(lk.topk(*a)), lambda *a: tuple(torch.topk(*a)), [X, 2],
             {1: [0, 4, -1, 2.5, None], 2: DIMS}),
    "sort": (lambda *a: tuple(lk.sort(*a)), lambda *a: tuple(torch.sort(*a)), [X, 0],
             {1: DIMS}),
    "add": (lk.add, torch.add, [X, X], {1: [T((3, 2)), T((2,)), None, "a", NAN]}),
    "mul": (lk.mul, torch.mul, [X, 2.0], {1: [T((3, 3)), None, "2"]}),
    "div": (lk.div, torch.div, [X, X], {1: [T((4,)), 0, None]}),
    "pow": (lk.pow, torch.pow, [X, 2], {1: [T((3,)), None, "2"]}),
    "clamp": (lk.clamp, torch.clamp, [X, -0.5, 0.5], {1: ["a", T((3,)), T((4,))],
                                                       2: [NAN, "b", T((4,))]}),
    "matmul": (lk.matmul, torch.matmul, [X, T((3, 4))],
               {0: [T(()), T((2, 3, 4, 5))], 1: [T((2, 3)), T(()), T((3, 3, 5, 6)), IDX]}),
    "mm": (lk.mm, torch.mm, [X, T((3, 4))], {1: [T((3,)), T((4, 4)), T((2, 3, 4))]}),
    "bmm": (lk.bmm, torch.bmm, [T((2, 2, 3)), T((2, 3, 4))], {1: [T((3, 3, 4)), T((3, 4))]}),
    "linear": (LF.linear, TF.linear, [X, T((4, 3))], {1: [T((3, 4)), T((4,)), T(())],
                                                      2: [T((5,)), T((4,))]}),
    "conv2d": (LF.conv2d, TF.conv2d, [T((1, 2, 5, 5)), T((3, 2, 3, 3)), None, 1, 0, 1],
               {1: [T((3, 3, 3, 3)), T((3, 2, 7, 7)), T((3, 2, 3))], 3: [0, -1, 2.5],
                4: [-1, 5, 2.5], 5: [0, -1, 2.5]}),
    "max_pool2d": (LF.max_pool2d, TF.max_pool2d, [T((1, 1, 4, 4)), 2, None, 0],
                   {0: [T((1, 1, 4, 4), "int64"), T((4, 4)), T((1, 1, 0, 4))],
                    1: [0, -1, 5, 2.5], 2: [0, -1], 3: [-1, 2, 1]}),
    "avg_pool2d": (LF.avg_pool2d, TF.avg_pool2d, [T((1, 1, 4, 4)), 2],
                   {1: [0, -1, 5], 0: [T((1, 1, 4, 4), "int64")]}),
    "interpolate": (LF.interpolate, TF.interpolate, [T((1, 1, 4, 4)), None, 2.0],
                    {1: [(0, 0), (-1, 2), 3], 2: [0.0, -1.0, NAN, None]}),
    "one_hot": (LF.one_hot, TF.one_hot, [T((3,), "int64", 1), 3],
                {0: [T((3,), "int64", -1), T((3,), "int64", 5), T((3,))], 1: [0, -2, 2.5]}),
    "pad": (LF.pad, TF.pad, [X, (1, 1)], {1: [(1,), (1, 1, 1, 1, 1, 1), (-4, 0), (1.5, 1)]}),
    "cross_entropy": (LF.cross_entropy, TF.cross_entropy, [X, T((2,), "int64", 1)],
                      {1: [T((2,), "int64", 3), T((2,), "int64", -1), T((3,), "int64", 0),
                           T((2, 3))]}),
}
IDS = sorted(SPECS)


def _values(result):
    """``max(x, dim)``'s (values, indices), or ``max(x)``'s one tensor, as a tuple."""
    return tuple(result) if isinstance(result, tuple) else (result,)

METHOD_CALLS = {"view", "expand", "repeat"}      # x.f(...): x itself stays a tensor


def _builtin(error):
    """The built-in class a labkit error must also be, for PyTorch's ``error``: its own
    built-in class (PyTorch's subclasses, such as torch.linalg.LinAlgError, are
    RuntimeErrors); NotImplementedError as RuntimeError (its base class); and PyTorch's
    AttributeError on None (its Python-level functions fail so) as TypeError."""
    for cls in type(error).__mro__:
        if cls.__module__ == "builtins":
            return {NotImplementedError: RuntimeError, AttributeError: TypeError}.get(cls, cls)
    return Exception


def _is(value, *kinds):
    return isinstance(value, kinds) and not isinstance(value, bool)


def _huge(args):
    return any(a == HUGE for a in args if _is(a, int)) or any(
        _huge(a) for a in args if isinstance(a, (tuple, list)))


def _int_tensor(v):
    return isinstance(v, T) and v.dtype in ("int64", "bool")


# Calls PyTorch refuses that labkit accepts, on purpose, with a meaningful result (NumPy's
# forms, and NumPy's dtype promotion); for each function, a test of the drawn arguments.
LENIENT = {
    # an int where PyTorch wants a tuple of ints
    "full": lambda a: _is(a[0], int),
    "reshape": lambda a: _is(a[1], int),
    "flip": lambda a: _is(a[1], int),
    "permute": lambda a: _is(a[1], int),
    "take": lambda a: _is(a[1], int, list, tuple),
    # labkit's earlier form of cat: the tensors as separate arguments
    "cat": lambda a: isinstance(a[0], T),
    # a number where PyTorch wants a tensor, or tensor bounds beside a number
    "pow": lambda a: _is(a[0], int, float),
    "clamp": lambda a: isinstance(a[1], T) or isinstance(a[2], T),
    # integer and bool operands promoted as NumPy promotes them
    "matmul": lambda a: _int_tensor(a[0]) or _int_tensor(a[1]),
    "mm": lambda a: _int_tensor(a[0]) or _int_tensor(a[1]),
    "linear": lambda a: _int_tensor(a[0]) or _int_tensor(a[1]),
    "mean": lambda a: _int_tensor(a[0]),
    "softmax": lambda a: _int_tensor(a[0]),
    "log_softmax": lambda a: _int_tensor(a[0]),
    "argmax": lambda a: _int_tensor(a[0]),
    "topk": lambda a: _int_tensor(a[0]),
    # a condition of any dtype (nonzero is true), or a number
    "where": lambda a: isinstance(a[0], T) or _is(a[0], int, float),
    # None as "not given": every dim, or no end
    "prod": lambda a: a[1] is None,
    "squeeze": lambda a: a[1] is None,
    "arange": lambda a: a[1] is None,
    "max": lambda a: a[1] is None,
}
# Calls where PyTorch itself goes wrong: sizes near 2**62 overflow its int64 arithmetic (a
# window dilated 2**62 "fits" a 5-pixel image), and an empty index of another rank is taken as
# fitting; labkit raises there. And one where labkit names another mistake first, on purpose:
# a float target of cross_entropy that is not shaped like the input is refused as not holding
# class indices (a DTypeError saying target.long() or target.argmax(dim=1)), where PyTorch
# complains of its batch size.
KNOWN = {
    "conv2d": _huge, "max_pool2d": _huge, "avg_pool2d": _huge,
    "gather": lambda a: isinstance(a[2], T) and a[2].shape == (0,),
    "cross_entropy": lambda a: isinstance(a[1], T) and a[1].dtype == "float32",
}


def _same(got, want):
    if isinstance(want, (tuple, list, torch.Size)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), (got, want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    if isinstance(want, torch.Tensor):
        assert isinstance(got, lk.Tensor), got
        assert tuple(got.shape) == tuple(want.shape), (got.shape, want.shape)
        assert got.dtype.name == str(want.dtype).replace("torch.", "").replace("bool", "bool_"), \
            (got.dtype, want.dtype)
        np.testing.assert_allclose(got.numpy().astype(np.float64),
                                   want.numpy().astype(np.float64), rtol=1e-5, atol=1e-6)
        return
    assert got == want or (isinstance(want, float) and math.isnan(want) and math.isnan(got))


def _torch_call(name, args, arrays):
    try:
        return SPECS[name][1](*_make(args, torch, arrays)), None
    except Exception as exc:
        return None, exc


def check_call(name, args, singles=()):
    """Call ``name`` with ``args`` in both libraries and check labkit's outcome against
    PyTorch's. ``singles``: the calls with only one of the bad arguments of ``args`` each;
    where ``args`` holds two mistakes, labkit may report either (the class PyTorch raises for
    that one alone)."""
    lk_fn = SPECS[name][0]
    arrays = {}
    lk_args = _make(args, lk, arrays)
    want, torch_error = _torch_call(name, args, arrays)
    lenient = LENIENT.get(name, lambda a: False)(args) or KNOWN.get(name, lambda a: False)(args)
    try:
        got = lk_fn(*lk_args)
    except lk.LabkitError as exc:
        assert name in str(exc) or name.replace("_", "") in str(exc).replace("_", ""), (
            f"{name}{args!r}: the error does not name the function: {exc}")
        if torch_error is None:
            assert lenient, (f"{name}{args!r}: PyTorch returns, labkit raised "
                             f"{type(exc).__name__}: {exc}")
            return "known"
        expected = _builtin(torch_error)
        either = [_builtin(e) for _, e in (_torch_call(name, a, arrays) for a in singles)
                  if e is not None]
        assert isinstance(exc, (expected, *either)) or lenient, (
            f"{name}{args!r}: labkit raised {type(exc).__name__} ({exc}), which is not a "
            f"{expected.__name__} as PyTorch's {type(torch_error).__name__} ({torch_error})")
        return "raised"
    except Exception as exc:
        raise AssertionError(f"{name}{args!r}: an internal error {type(exc).__name__}: {exc} "
                             f"(PyTorch: {torch_error!r})") from None
    if torch_error is not None:
        assert lenient, (f"{name}{args!r}: PyTorch raises {type(torch_error).__name__} "
                         f"({torch_error}), labkit returned {got!r}")
        return "lenient"
    _same(got, want)
    return "returned"


def _calls(name):
    _, _, valid, extras = SPECS[name]

    @st.composite
    def draw(draw):
        args = list(valid)
        first = 1 if name in METHOD_CALLS else 0
        positions = draw(st.lists(st.sampled_from(range(first, len(valid))), min_size=1,
                                  max_size=2, unique=True))
        singles = []
        for p in positions:
            args[p] = draw(st.sampled_from(extras.get(p, []) + ANY))
            single = list(valid)
            single[p] = args[p]
            singles.append(tuple(single))
        return tuple(args), tuple(singles) if len(singles) > 1 else ()
    return draw()


@pytest.mark.parametrize("name", IDS)
def test_bad_calls_raise_where_pytorch_raises(name):
    @settings(max_examples=CALLS_PER_FUNCTION, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(_calls(name))
    def run(call):
        check_call(name, *call)
    run()


@pytest.mark.parametrize("name", IDS)
def test_the_valid_call_matches_pytorch(name):
    assert check_call(name, tuple(SPECS[name][2])) == "returned"
