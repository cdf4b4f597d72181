"""The op harness: every registered primitive and every public composite, checked the same ways.

For each case in op_cases.py, on every device (the GPU runs are skipped where there is none):

- values against the NumPy oracle, in float64 and in float32 (result dtypes included), on the
  case's edge inputs and on random inputs drawn by hypothesis;
- every primitive that runs (inside composites and vjps too) has its shape/dtype rule compared
  with what its kernel returned;
- gradients against central differences in float64 (``lk.gradcheck``), and the gradient of the
  vjp itself (second order, in both the primal and the cotangent);
- float32 gradients keep their input's dtype and shape;
- ``lk.vmap`` of the case (its inputs stacked from 1-3 examples along random axes) against
  stacking the case over the examples, values and per-example gradients: through the op's
  batching rule, or one example at a time for an op without one.

Plus: the table covers every op in the registry; elementwise result dtypes follow NumPy's
promotion for every pair of labkit dtypes (and Python scalars); a wrong vjp fails gradcheck;
errors name the op, the shapes, dtypes and devices, and a remedy.
"""
import itertools
import os
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import labkit as lk
from labkit.autodiff import gradients
from labkit.autodiff import batched
from labkit.tensor import dispatch
from labkit.tensor.eager import EagerMode
from labkit.tensor.op import REGISTRY
from labkit.tensor.shape_rules import same_as_first

from .case_kit import assert_clear_error, assert_vmap_refusal, torch_gradients
from .cases import complex as _complex_cases
from .cases import fft as _fft_cases
from .cases import linalg as _linalg_cases
from .op_cases import ALL_CASES, COMPOSITE_CASES, COMPOSITE_NAMES, PRIMITIVE_CASES, \
    sample_strategy

# Few examples, derandomized, so CI is quick and reproducible; LABKIT_TEST_EXAMPLES=500 soaks.
EXAMPLES = int(os.environ.get("LABKIT_TEST_EXAMPLES", "40"))
HYPOTHESIS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                      suppress_health_check=[HealthCheck.function_scoped_fixture,
                                             HealthCheck.too_slow, HealthCheck.data_too_large])
DIFFERENTIABLE = [c for c in ALL_CASES if c.differentiable]
SECOND_ORDER = [c for c in DIFFERENTIABLE if c.second_order]
# cases whose oracle is PyTorch: their gradients are compared with torch.autograd's too
AGAINST_TORCH = [c for c in DIFFERENTIABLE if getattr(c.ref, "torch_fn", None)]


def ids(case):
    return case.name


# ---- a mode that checks each primitive's shape/dtype rule against its kernel --------------
class RuleCheckingMode(EagerMode):
    """Eager mode that also runs every op's shape rule and compares it with the real output."""

    def __init__(self):
        self.seen = set()

    def apply(self, op, inputs, attrs):
        result = super().apply(op, inputs, attrs)
        self.seen.add(op.name)
        shape, dtype = op.shape(*inputs, **attrs)
        what = ", ".join(lk.errors.describe(a) for a in inputs)
        if shape is not None:   # None dims: data-dependent (boolean-mask indexing)
            known = tuple(r if s is None else s for s, r in zip(shape, result.shape))
            assert len(shape) == result.ndim and known == result.shape, (
                f"{op.name}: shape rule says {tuple(shape)}, kernel gave {result.shape} "
                f"for ({what}) {attrs}")
        assert dtype is result.dtype, (
            f"{op.name}: shape rule says {dtype}, kernel gave {result.dtype} for ({what}) {attrs}")
        return result


# ---- helpers ------------------------------------------------------------------------------------
def _as_float(a, dtype):
    if isinstance(a, np.ndarray) and a.dtype.kind == "f":
        return a.astype(dtype)
    return a


def _to_lk(a, device, dtype=np.float64):
    assert not isinstance(a, np.generic), "harness: build arrays with _arr(), not NumPy scalars"
    if isinstance(a, np.ndarray):
        return lk.tensor(_as_float(a, dtype), device=device)
    return a


def _grad_positions(sample):
    if sample.grad is not None:
        return sample.grad
    return tuple(i for i, a in enumerate(sample.args)
                 if isinstance(a, np.ndarray) and a.dtype.kind == "f")


def _combine(out):
    """One tensor from an op's result (split returns a tuple of pieces)."""
    if isinstance(out, tuple):
        return lk.concat(*[lk.reshape(o, shape=(-1,)) for o in out])
    return out


def _compare(case, out, expected, rtol, atol, where):
    if isinstance(expected, tuple):
        assert isinstance(out, tuple) and len(out) == len(expected), where
        for o, e in zip(out, expected):
            _compare(case, o, e, rtol, atol, where)
        return
    expected = np.asarray(expected)
    assert isinstance(out, lk.Tensor), where
    assert out.shape == expected.shape, f"{where}: shape {out.shape} != {expected.shape}"
    assert out.dtype.np == expected.dtype, f"{where}: dtype {out.dtype} != {expected.dtype}"
    got = out.numpy()
    if expected.dtype.kind in "biu":
        np.testing.assert_array_equal(got, expected, err_msg=where)
    else:
        np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64),
                                   rtol=rtol, atol=atol, equal_nan=True, err_msg=where)


def check_values(case, sample, device, dtype=np.float64):
    args = [_to_lk(a, device, dtype) for a in sample.args]
    ref_args = [_as_float(a, dtype) for a in sample.args]
    mode = RuleCheckingMode()
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # NumPy's "mean of empty slice"
        with dispatch.push_mode(mode):
            out = case.fn(*args, **sample.kwargs)
        expected = case.ref(*ref_args, **sample.kwargs)
    if case.op is not None:
        assert case.op in mode.seen, f"case {case.name} never ran its op {case.op}"
    if dtype == np.float64:
        rtol, atol = case.rtol, case.atol
    else:
        rtol, atol = 2e-3, 2e-3
    _compare(case, out, expected, rtol, atol, f"{case.name} {sample} ({np.dtype(dtype)})")


def _bind(case, sample, args, pos):
    def f(*xs):
        full = list(args)
        for p, x in zip(pos, xs):
            full[p] = x
        return _combine(case.fn(*full, **sample.kwargs))
    return f


def _finite(f, args, pos):
    """Whether f's output is finite (nan/inf outputs, e.g. a max-pool window that lies wholly in
    the padding, have no derivative to check: their values are checked by the value tests)."""
    with np.errstate(all="ignore"):
        return bool(np.isfinite(f(*[args[p] for p in pos]).numpy()).all())


def check_gradients(case, sample, device):
    args = [_to_lk(a, device) for a in sample.args]
    pos = _grad_positions(sample)
    f = _bind(case, sample, args, pos)
    if not _finite(f, args, pos):
        return
    with np.errstate(all="ignore"), dispatch.push_mode(RuleCheckingMode()):
        assert lk.gradcheck(f, [args[p] for p in pos], **case.grad_kw)


def check_second_order(case, sample, device):
    """gradcheck of (x, u) -> <vjp_f(x)(u), w>: vjp rules are themselves differentiable."""
    args = [_to_lk(a, device) for a in sample.args]
    pos = _grad_positions(sample)
    f = _bind(case, sample, args, pos)
    rng = np.random.default_rng(1)
    if not _finite(f, args, pos):
        return
    with np.errstate(all="ignore"):
        out = f(*[args[p] for p in pos])
    u = lk.tensor(rng.standard_normal(out.shape), device=device)
    ws = [lk.tensor(rng.standard_normal(args[p].shape), device=device) for p in pos]

    def h(*xs_u):
        *xs, cot = xs_u
        with lk.enable_grad():
            xs = [x if x.requires_grad else x.detach().requires_grad_() for x in xs]
            gs = gradients(f(*xs), xs, grad_outputs=cot, create_graph=True)
            total = lk.zeros((), dtype="float64", device=device)
            for g, w in zip(gs, ws):
                total = total + lk.sum(g * w)
        return total

    with np.errstate(all="ignore"), dispatch.push_mode(RuleCheckingMode()):
        assert lk.gradcheck(h, [args[p] for p in pos] + [u], **case.grad_kw)


def check_float32_gradients(case, sample, device, dtype=np.float32):
    args = [_to_lk(a, device, dtype) for a in sample.args]
    pos = _grad_positions(sample)
    xs = [args[p].requires_grad_() for p in pos]
    with np.errstate(all="ignore"):
        out = _combine(case.fn(*args, **sample.kwargs))
        gs = gradients(out, xs, grad_outputs=lk.ones(out.shape, dtype=out.dtype, device=device))
    for x, g in zip(xs, gs):
        assert g.shape == x.shape and g.dtype is x.dtype and g.device is x.device, (
            f"{case.name}: gradient {lk.errors.describe(g)} for input {lk.errors.describe(x)}")


def check_torch_gradients(case, sample, device):
    """The vjp of a random cotangent, against PyTorch's autograd on the same float64 inputs."""
    args = [_to_lk(a, device) for a in sample.args]
    pos = _grad_positions(sample)
    f = _bind(case, sample, args, pos)
    if not _finite(f, args, pos):
        return
    xs = [args[p].detach().requires_grad_() for p in pos]
    with np.errstate(all="ignore"):
        out = f(*xs)
        cot = np.random.default_rng(2).standard_normal(out.shape)
        got = gradients(out, xs, grad_outputs=lk.tensor(cot, dtype=out.dtype, device=device))
    ref_args = [_as_float(a, np.float64) for a in sample.args]
    expected = torch_gradients(case.ref.torch_fn, ref_args, pos, cot, sample.kwargs)
    for p, g, e in zip(pos, got, expected):
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-6, atol=1e-9,
                                   err_msg=f"{case.name}: gradient of input {p} vs PyTorch, "
                                           f"{sample}")


def _edge_samples(case):
    rng = np.random.default_rng(0)
    return [case.sample(rng, p) for p in case.edges]


def _drawn(case, data):
    params, seed = data.draw(sample_strategy(case), label="params, seed")
    return case.sample(np.random.default_rng(seed), params)


# ---- lk.vmap: a case over a batch of examples equals the case over each example, stacked -------
def _vmap_inputs(case, samples, rng, device):
    """The batched arguments, their in_axes, and each example's arguments: each array argument
    stacked along a random axis (or, now and then, left out of the batch: then every example
    gets the first sample's value). An in-place update's target is always batched."""
    first = samples[0]
    arrays = [i for i, a in enumerate(first.args) if isinstance(a, np.ndarray)]
    batched = {i for i in arrays if rng.random() < 0.7} or {int(rng.choice(arrays))}
    writes = getattr(REGISTRY.get(case.op), "writes", None)
    if writes is not None:
        batched.add(writes)
    args, axes, examples = [], [], [[] for _ in samples]
    for i, a in enumerate(first.args):
        if i in batched:
            ax = int(rng.integers(-a.ndim - 1, a.ndim + 1))
            args.append(_to_lk(np.stack([s.args[i] for s in samples], axis=ax), device))
            axes.append(ax)
            for ex, s in zip(examples, samples):
                ex.append(_to_lk(s.args[i], device))
        else:
            args.append(_to_lk(a, device))
            axes.append(None)
            for ex in examples:
                ex.append(_to_lk(a, device))
    return args, tuple(axes), examples


def _same_shapes(samples):
    return len({tuple(getattr(a, "shape", None) for a in s.args) for s in samples}) == 1


def _numpy_outputs(out):
    return tuple(o.numpy() for o in out) if isinstance(out, tuple) else (out.numpy(),)


class _FallbackLog:
    """Records which ops lk.vmap ran one example at a time (for the check that every op with a
    batching rule used it)."""

    def __init__(self):
        self.names = []
        self.real = batched.one_by_one

    def __call__(self, fn, name, inputs, bdims):
        self.names.append(name)
        return self.real(fn, name, inputs, bdims)


def _per_example(run, examples, fn, axes, args):
    """``run`` of each example's arguments; None where one example's arguments do not fit the
    case's keyword arguments (they are the first example's: ``output_size``, the sum of that
    example's repeats), having checked that lk.vmap refuses ``fn``: such a value is each
    example's own, which the batch's one keyword cannot hold."""
    try:
        return [run(ex) for ex in examples]
    except lk.LabkitError:
        with pytest.raises(lk.autodiff.DataDependentShapeError) as info:
            lk.vmap(fn, in_axes=axes)(*args)
        assert_vmap_refusal(info.value)
        return None


def check_vmap(case, samples, seed, device):
    if not _same_shapes(samples):
        return
    rng = np.random.default_rng(seed)
    args, axes, examples = _vmap_inputs(case, samples, rng, device)
    kwargs = samples[0].kwargs
    fn = lambda *xs: case.fn(*xs, **kwargs)    # noqa: E731
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", lk.autodiff.VmapFallbackWarning)
        expected = _per_example(lambda ex: _numpy_outputs(fn(*ex)), examples, fn, axes, args)
        if expected is None:
            return
        shapes = {tuple(e.shape for e in outs) for outs in expected}
        if len(shapes) > 1:       # a boolean mask picking another count in each example
            with pytest.raises(lk.LabkitError):
                lk.vmap(fn, in_axes=axes)(*args)
            return
        nd = expected[0][0].ndim
        out_axis = int(rng.integers(-nd - 1, nd + 1)) if len(expected[0]) == 1 else 0
        log = _FallbackLog()
        batched.one_by_one = log
        try:
            got = _numpy_outputs(lk.vmap(fn, in_axes=axes, out_axes=out_axis)(*args))
        except lk.autodiff.DataDependentShapeError as exc:
            assert_vmap_refusal(exc)
            return
        except lk.autodiff.VmapError as exc:     # the function reads values (x.item(), if x...)
            pytest.skip(f"{case.name} reads one example's values, so it cannot be vmapped: {exc}")
        finally:
            batched.one_by_one = log.real
    where = f"vmap of {case.name} in_axes={axes} out_axes={out_axis} {samples[0]}"
    for k, g in enumerate(got):
        e = np.stack([outs[k] for outs in expected], axis=out_axis)
        assert g.shape == e.shape and g.dtype == e.dtype, (
            f"{where}: got {g.dtype}{g.shape}, expected {e.dtype}{e.shape}")
        if e.dtype.kind in "biu":
            np.testing.assert_array_equal(g, e, err_msg=where)
        else:
            np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12, equal_nan=True, err_msg=where)
    # (indexing loops over the examples where a 0-d boolean mask meets batched index tensors)
    ruled = [n for n in log.names if REGISTRY.get(n) is not None and
             REGISTRY[n].batch is not None and n not in ("getitem", "index_add", "index_put")]
    assert not ruled, f"{where}: ops with a batching rule ran one example at a time: {ruled}"


def check_vmap_gradients(case, samples, seed, device):
    """Per-example gradients (vmap of grad) of <case(x), c> equal each example's gradient."""
    if not _same_shapes(samples):
        return
    rng = np.random.default_rng(seed)
    args, axes, examples = _vmap_inputs(case, samples, rng, device)
    pos = _grad_positions(samples[0])
    kwargs = samples[0].kwargs
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", lk.autodiff.VmapFallbackWarning)
        outs = _per_example(lambda ex: _combine(case.fn(*ex, **kwargs)), examples,
                            lambda *xs: case.fn(*xs, **kwargs), axes, args)
        if outs is None:
            return
        out = outs[0]
        if len({o.shape for o in outs}) > 1 or not np.isfinite(out.numpy()).all():
            return        # a boolean mask picking another count in each example; nan/inf
        cot = lk.tensor(rng.standard_normal(out.shape), dtype=out.dtype, device=device)

        def loss(*xs):
            return lk.sum(_combine(case.fn(*xs, **kwargs)) * cot)
        grad = lk.grad(loss, argnums=pos)
        expected = [[g.numpy() for g in grad(*ex)] for ex in examples]
        try:
            got = lk.vmap(grad, in_axes=axes)(*args)
        except lk.autodiff.DataDependentShapeError as exc:
            assert_vmap_refusal(exc)
            return
        except lk.autodiff.VmapError as exc:
            pytest.skip(f"{case.name} reads one example's values, so it cannot be vmapped: {exc}")
    for k, g in enumerate(got):
        e = np.stack([ex[k] for ex in expected])
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-9, atol=1e-12,
                                   err_msg=f"per-example gradient {k} of {case.name} "
                                           f"in_axes={axes} {samples[0]}")


def _vmap_samples(case, params, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 4))
    return [case.sample(np.random.default_rng(seed + 1 + k), params) for k in range(n)]


@pytest.mark.parametrize("case", ALL_CASES, ids=ids)
def test_vmap_edges(case, device):
    for i, params in enumerate(case.edges):
        check_vmap(case, _vmap_samples(case, params, i), i, device)


@pytest.mark.parametrize("case", ALL_CASES, ids=ids)
@settings(HYPOTHESIS, max_examples=max(EXAMPLES // 4, 1))
@given(data=st.data())
def test_vmap_random(case, device, data):
    params, seed = data.draw(sample_strategy(case), label="params, seed")
    check_vmap(case, _vmap_samples(case, params, seed), seed, device)


@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=ids)
def test_vmap_gradients_edges(case, device):
    for i, params in enumerate(case.edges):
        check_vmap_gradients(case, _vmap_samples(case, params, i), i, device)


@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=ids)
@settings(HYPOTHESIS, max_examples=max(EXAMPLES // 8, 1))
@given(data=st.data())
def test_vmap_gradients_random(case, device, data):
    params, seed = data.draw(sample_strategy(case), label="params, seed")
    check_vmap_gradients(case, _vmap_samples(case, params, seed), seed, device)


# ---- the table is complete ---------------------------------------------------------------
# Registered ops without a batching rule (lk.vmap runs them once per example, with a
# VmapFallbackWarning), each with the reason a rule is impossible or pointless. None now: the
# ops whose result's size depends on each example's values have a rule that refuses them
# (case_kit.DATA_DEPENDENT). A new op without a rule fails the test below until it has one, or
# is listed here with its reason.
WITHOUT_BATCHING_RULE = {}


def _declared_in_files(registry):
    """The registry without ops declared by doctests or notebook cells that ran in this
    process (``lk.op``'s own example declares ``cube``): their code has no file."""
    def filename(o):
        return getattr(getattr(o.kernel, "__code__", None), "co_filename", "labkit")
    return {name: o for name, o in registry.items() if not filename(o).startswith("<")}


def test_every_registered_op_has_a_batching_rule():
    missing = sorted(name for name, o in _declared_in_files(REGISTRY).items() if o.batch is None)
    assert missing == sorted(WITHOUT_BATCHING_RULE), (
        f"registered ops without a batching rule (lk.vmap runs them one example at a time): "
        f"{sorted(set(missing) - set(WITHOUT_BATCHING_RULE))}. Declare one beside the op's vjp "
        f"(@op(..., batch=rule), shared families in labkit/tensor/batching.py), or list the op "
        f"in WITHOUT_BATCHING_RULE with the reason it cannot have one. Listed but ruled now: "
        f"{sorted(set(WITHOUT_BATCHING_RULE) - set(missing))}")


def _uncovered(registry):
    return sorted(set(registry) - {c.op for c in PRIMITIVE_CASES})


def test_every_registered_op_has_a_case():
    missing = _uncovered(_declared_in_files(REGISTRY))
    assert not missing, (f"registered ops without a test case in tests/tensor/op_cases.py: "
                         f"{missing}. Add a Case (inputs, NumPy oracle, differentiable?) for each.")
    stale = sorted({c.op for c in PRIMITIVE_CASES} - set(REGISTRY))
    assert not stale, f"cases for ops that are not registered: {stale}"


def test_a_new_registered_op_without_a_case_is_caught():
    new = lk.op("untested_double", shape=same_as_first)(lambda xp, x: x * 2)
    try:
        assert REGISTRY["untested_double"] is new
        assert _uncovered(_declared_in_files(REGISTRY)) == ["untested_double"]
    finally:
        del REGISTRY["untested_double"]
    assert _uncovered(_declared_in_files(REGISTRY)) == []


def test_every_composite_has_a_case():
    names = {c.name for c in COMPOSITE_CASES}
    assert set(COMPOSITE_NAMES) <= names
    for name in ("mean", "var", "softmax", "log_softmax", "logsumexp", "transpose", "squeeze",
                 "unsqueeze", "flatten", "clip", "stack", "split", "take", "conv2d",
                 "max_pool2d", "avg_pool2d", "gather", "scatter_add"):
        assert callable(getattr(lk, name)), name


def test_case_names_are_unique():
    names = [c.name for c in ALL_CASES]
    assert len(names) == len(set(names))


# ---- values ----------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ALL_CASES, ids=ids)
def test_values_edges(case, device):
    for sample in _edge_samples(case):
        check_values(case, sample, device)
        check_values(case, sample, device, np.float32)


@pytest.mark.parametrize("case", ALL_CASES, ids=ids)
@HYPOTHESIS
@given(data=st.data())
def test_values_random(case, device, data):
    sample = _drawn(case, data)
    check_values(case, sample, device)
    check_values(case, sample, device, np.float32)


# ---- gradients -----------------------------------------------------------------------------
@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=ids)
def test_gradients_edges(case, device):
    for sample in _edge_samples(case):
        check_gradients(case, sample, device)
        check_float32_gradients(case, sample, device)


@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=ids)
@HYPOTHESIS
@given(data=st.data())
def test_gradients_random(case, device, data):
    check_gradients(case, _drawn(case, data), device)


# ---- float16 and bfloat16: every op computes in float32 and rounds its result back ---------
def _half(a, low):
    return a.astype(low) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a


# cases whose float32 result need not come back in the half type: a float32 0-d tensor added
# (to_device), and float32 only as in PyTorch (dynamic quantization)
NOT_HALF = {"to_device", "quantized_linear_dynamic"}
# linear algebra refuses half precision, as PyTorch's does on a CPU ("Low precision dtypes not
# supported")
LINALG = {c.name for c in _linalg_cases.INVERSES + _linalg_cases.DECOMPOSITIONS +
          _linalg_cases.NORMS + _linalg_cases.PRODUCTS}
# complex values have no half type here (PyTorch's complex32 has no NumPy dtype): these cases
# make their complex inputs from float parts, which a half pass cannot lower
COMPLEX = {c.name for c in _complex_cases.PRIMITIVE_CASES + _complex_cases.COMPOSITE_CASES +
           _fft_cases.PRIMITIVE_CASES + _fft_cases.COMPOSITE_CASES}


def check_low_precision(case, sample, device, dtype):
    """The case on half-precision inputs: every op's rule agrees with its kernel (result dtypes
    included), a float32 result comes back in the half type, and its values are the float32
    ones on the same (rounded) inputs to the half type's precision."""
    low = lk.as_dtype(dtype).np
    halves = [_half(a, low) for a in sample.args]
    args = [lk.tensor(a, device=device) if isinstance(a, np.ndarray) else a for a in halves]
    ref_args = [lk.tensor(_as_float(a, np.float32) if isinstance(a, np.ndarray) and
                          a.dtype == low else a, device=device)
                if isinstance(a, np.ndarray) else a for a in halves]
    mode = RuleCheckingMode()
    where = f"{case.name} {sample} ({dtype})"
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            with dispatch.push_mode(mode):
                out = _combine(case.fn(*args, **sample.kwargs))
        except lk.DTypeError as e:
            assert case.name in LINALG and "float32 or float64" in str(e), f"{where}: {e}"
            return
        ref = _combine(case.fn(*ref_args, **sample.kwargs))
    want = low if ref.dtype is lk.float32 else ref.dtype.np
    assert case.name in NOT_HALF or out.dtype.np == want and out.shape == ref.shape, \
        f"{where}: {lk.errors.describe(out)}, expected {np.dtype(want)} {ref.shape}"
    got, expected = out.numpy().astype(np.float64), ref.numpy().astype(np.float64)
    if ref.dtype.is_floating:
        # where float32's value is beyond the half type's range, the half result is +-inf
        big = np.abs(expected) > float(lk.finfo(lk.as_dtype(dtype)).max) / 2
        got, expected = got[~big], expected[~big]
        scale = max(1.0, float(np.nanmax(np.abs(expected), initial=0.0)))
        np.testing.assert_allclose(got, expected, rtol=0.05, atol=0.05 * scale, equal_nan=True,
                                   err_msg=where)
    else:
        np.testing.assert_array_equal(got, expected, err_msg=where)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", ALL_CASES, ids=ids)
def test_low_precision_edges(case, dtype, device):
    if dtype == "bfloat16" and not device.startswith("cpu"):
        pytest.skip("CuPy has no bfloat16")
    if case.name in COMPLEX:
        pytest.skip("complex values have no half-precision type")
    for sample in _edge_samples(case):
        check_low_precision(case, sample, device, dtype)
        if case.differentiable and case.name not in LINALG | NOT_HALF:   # in the input's dtype
            check_float32_gradients(case, sample, device, lk.as_dtype(dtype).np)


@pytest.mark.parametrize("case", AGAINST_TORCH, ids=ids)
def test_gradients_against_torch_edges(case, device):
    for sample in _edge_samples(case):
        check_torch_gradients(case, sample, device)


@pytest.mark.parametrize("case", AGAINST_TORCH, ids=ids)
@settings(HYPOTHESIS, max_examples=max(EXAMPLES // 2, 1))
@given(data=st.data())
def test_gradients_against_torch_random(case, device, data):
    check_torch_gradients(case, _drawn(case, data), device)


@pytest.mark.parametrize("case", SECOND_ORDER, ids=ids)
def test_second_order_edges(case, device):
    for sample in _edge_samples(case)[:4]:
        check_second_order(case, sample, device)


@pytest.mark.parametrize("case", SECOND_ORDER, ids=ids)
@settings(HYPOTHESIS, max_examples=max(EXAMPLES // 3, 1))
@given(data=st.data())
def test_second_order_random(case, device, data):
    check_second_order(case, _drawn(case, data), device)


# ---- dtype promotion of elementwise ops: PyTorch's rules, PyTorch as the oracle ----------------
DTYPES = ["bfloat16", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
          "bool_", "complex64", "complex128"]
UNARY = {"neg": "neg", "exp": "exp", "log": "log", "sqrt": "sqrt", "abs": "abs", "sign": "sign",
         "tanh": "tanh", "sigmoid": "sigmoid", "relu": "relu", "logical_not": "logical_not"}
BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "truediv", "pow": "pow",
          "maximum": "maximum", "minimum": "minimum", "eq": "eq", "ne": "ne", "lt": "lt",
          "le": "le", "gt": "gt", "ge": "ge"}
OPERATORS = {"add", "sub", "mul", "div", "pow", "eq", "ne", "lt", "le", "gt", "ge"}


def _values(dtype, shape=(2,)):
    return np.full(shape, 2 if dtype != "bool_" else True, dtype=lk.as_dtype(dtype).np)


def _dtypes(device):
    """The dtypes to check on ``device`` (CuPy has no bfloat16)."""
    return DTYPES if device.startswith("cpu") else [d for d in DTYPES if d != "bfloat16"]


def _to_torch(a):
    """A NumPy array (or a number) as PyTorch's (bfloat16 through float32: torch.from_numpy
    does not take ml_dtypes' arrays)."""
    import torch
    if not isinstance(a, np.ndarray):
        return a
    if a.dtype == lk.bfloat16.np:
        return torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(a.copy())


def _from_torch(t):
    import torch
    if t.dtype == torch.bfloat16:
        return t.float().numpy().astype(lk.bfloat16.np)
    return t.numpy()


def _torch_result(name, args):
    """PyTorch's result of ``torch.<name>(*args)`` (or of the operator ``name``, such as
    ``truediv``) with NumPy arrays as tensors, as a NumPy array; None where PyTorch refuses."""
    import operator

    import torch
    targs = [_to_torch(a) for a in args]
    fn = getattr(operator, name, None) or getattr(torch, name)
    try:
        out = fn(*targs)
    except (RuntimeError, TypeError) as exc:
        if "ComplexHalf" not in str(exc):
            return None
        # float16 with a complex number is complex32 in PyTorch, which NumPy lacks and many
        # PyTorch kernels too: labkit computes it in complex64, as PyTorch does from float32
        return _torch_result(name, [a.astype(np.float32) if getattr(a, "dtype", None) ==
                                    np.float16 else a for a in args])
    if out.dtype == torch.complex32:
        out = out.to(torch.complex64)
    return _from_torch(out)


def _check_dtype(name, fn, torch_name, np_args, lk_args):
    expected = _torch_result(torch_name, np_args)
    what = f"{name}({', '.join(_kind(a) for a in np_args)})"
    if expected is None:
        with pytest.raises(lk.DTypeError, match=name):
            fn(*lk_args)
        return
    mode = RuleCheckingMode()
    with np.errstate(all="ignore"), dispatch.push_mode(mode):
        out = fn(*lk_args)
    assert out.dtype.np == expected.dtype, \
        f"{what}: labkit gives {out.dtype}, PyTorch {expected.dtype}"
    wide = np.complex128 if expected.dtype.kind == "c" else np.float64
    np.testing.assert_allclose(out.numpy().astype(wide), expected.astype(wide), rtol=1e-3,
                               err_msg=what)


def _kind(a):
    if isinstance(a, np.ndarray):
        return f"{a.dtype}{'' if a.ndim else ' 0-d'}"
    return type(a).__name__


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_result_dtypes(name, device):
    for d in _dtypes(device):
        x = _values(d)
        _check_dtype(name, getattr(lk, name), UNARY[name], [x], [lk.tensor(x, device=device)])


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_result_dtypes(name, device):
    """Every pair of dtypes, as tensors with dimensions and as 0-d tensors, and with Python
    numbers on either side."""
    for da, db in itertools.product(_dtypes(device), repeat=2):
        for shape_b in ((3, 1), ()):
            a, b = _values(da), _values(db, shape_b)
            _check_dtype(name, getattr(lk, name), BINARY[name], [a, b],
                         [lk.tensor(a, device=device), lk.tensor(b, device=device)])
    if name not in OPERATORS:
        return                           # PyTorch's maximum/minimum take tensors only
    for d, scalar in itertools.product(_dtypes(device), (2, 2.0, True, 2 + 1j)):
        a = _values(d)
        if name == "pow" and d == "bool_" and scalar is True:
            continue     # PyTorch takes bool_tensor ** True alone of bool powers; labkit none
        _check_dtype(name, getattr(lk, name), BINARY[name], [a, scalar],
                     [lk.tensor(a, device=device), scalar])
        _check_dtype(name, getattr(lk, name), BINARY[name], [scalar, a],
                     [scalar, lk.tensor(a, device=device)])


def test_default_dtype_sets_what_python_floats_and_int_division_give(device):
    import torch
    lk.set_default_dtype(lk.float64)
    torch.set_default_dtype(torch.float64)
    try:
        i = lk.tensor([1, 2], device=device)
        assert lk.tensor(1.5).dtype is lk.float64 and lk.zeros(2).dtype is lk.float64
        assert (i / 2).dtype is lk.float64 and (i * 0.5).dtype is lk.float64
        assert (lk.ones(2, dtype=lk.float32) * 0.5).dtype is lk.float32
    finally:
        lk.set_default_dtype(lk.float32)
        torch.set_default_dtype(torch.float32)
    assert lk.get_default_dtype() is lk.float32 and (lk.tensor([1]) / 2).dtype is lk.float32
    with pytest.raises(lk.DTypeError, match="float"):
        lk.set_default_dtype(lk.int64)


def test_where_and_concat_result_dtypes(device):
    import torch
    cond = np.array([True, False])
    for da, db in itertools.product(_dtypes(device), repeat=2):
        a, b = _values(da), _values(db)
        ta, tb = lk.tensor(a, device=device), lk.tensor(b, device=device)
        tc = lk.tensor(cond, device=device)
        t = [_to_torch(v) for v in (cond, a, b)]
        with dispatch.push_mode(RuleCheckingMode()):
            assert lk.where(tc, ta, tb).dtype.np == _from_torch(torch.where(*t)).dtype
            assert lk.concat(ta, tb).dtype.np == _from_torch(torch.cat(t[1:])).dtype
            assert lk.where(tc, ta, 1.5).dtype.np == \
                _from_torch(torch.where(t[0], t[1], 1.5)).dtype


def test_operators_match_ops(device):
    a = lk.tensor([[1.5, -2.0]], device=device)
    b = lk.tensor([[0.5], [4.0]], device=device)
    for op_fn, fn in ((lambda x, y: x + y, lk.add), (lambda x, y: x - y, lk.sub),
                      (lambda x, y: x * y, lk.mul), (lambda x, y: x / y, lk.div),
                      (lambda x, y: x < y, lk.lt), (lambda x, y: x >= y, lk.ge)):
        np.testing.assert_array_equal(op_fn(a, b).numpy(), fn(a, b).numpy())
    np.testing.assert_array_equal((-a).numpy(), lk.neg(a).numpy())
    np.testing.assert_array_equal(abs(a).numpy(), lk.abs(a).numpy())
    np.testing.assert_array_equal((a @ a.T).numpy(), lk.matmul(a, a.T).numpy())


# ---- fold is the adjoint of unfold -------------------------------------------------------------
@pytest.mark.parametrize("geo", [dict(kernel_size=(2, 3), stride=(2, 1), padding=(1, 0),
                                      dilation=(1, 2)),
                                 dict(kernel_size=(3, 3), stride=(1, 1), padding=(1, 1),
                                      dilation=(1, 1))])
def test_fold_is_adjoint_of_unfold(geo, device):
    from labkit.tensor.ops.conv import fold, unfold
    rng = np.random.default_rng(3)
    x = lk.tensor(rng.standard_normal((2, 2, 5, 6)), device=device)
    cols = unfold(x, **geo)
    c = lk.tensor(rng.standard_normal(cols.shape), device=device)
    lhs = float(lk.sum(cols * c).item())
    rhs = float(lk.sum(x * fold(c, image_shape=x.shape, **geo)).item())
    assert abs(lhs - rhs) < 1e-9 * max(1.0, abs(lhs))


# ---- the gradient checker catches a wrong rule ------------------------------------------------
def test_wrong_vjp_fails_gradcheck(device):
    wrong = lk.op("wrong_square", shape=same_as_first, register=False,
                  vjp=lambda g, out, x: (g * x,))(lambda xp, x: x * x)   # should be 2 * g * x
    right = lk.op("right_square", shape=same_as_first, register=False,
                  vjp=lambda g, out, x: (g * x * 2.0,))(lambda xp, x: x * x)
    assert "wrong_square" not in REGISTRY and "right_square" not in REGISTRY
    x = lk.tensor(np.random.default_rng(0).standard_normal((3, 2)), device=device)
    assert lk.gradcheck(right, [x])
    with pytest.raises(lk.autodiff.GradcheckError, match="differ"):
        lk.gradcheck(wrong, [x])
    assert lk.gradcheck(wrong, [x], raise_exception=False) is False


def test_wrong_second_order_rule_fails_gradcheck(device):
    # first derivative right, but written on raw values: the vjp is not differentiable itself
    def detached_vjp(g, out, x):
        return (g * lk.tensor(np.cos(x.numpy()), device=x.device),)
    sin = lk.op("raw_sin", shape=same_as_first, register=False, vjp=detached_vjp)(
        lambda xp, x: xp.sin(x))
    x = lk.tensor([0.3, -1.2], dtype="float64", device=device)
    assert lk.gradcheck(sin, [x])
    with pytest.raises(lk.autodiff.GradcheckError):
        lk.gradcheck(lambda x: lk.grad(lambda y: sin(y).sum())(x), [x])


def test_declared_op_runs_eagerly_with_gradients(device):
    cube = lk.op("cube_test", shape=same_as_first, register=False,
                 vjp=lambda g, out, x: (g * 3.0 * x * x,))(lambda xp, x: x * x * x)
    x = lk.tensor([1.0, -2.0], dtype="float64", device=device)
    np.testing.assert_allclose(cube(x).numpy(), [1.0, -8.0])
    assert lk.gradcheck(cube, [x])
    assert lk.gradcheck(lambda x: lk.grad(lambda y: cube(y).sum())(x), [x])


# ---- errors name the op, shapes, dtypes, devices and a remedy ----------------------------------
def _err_cases(device):
    from labkit.tensor.ops.conv import unfold
    t = lambda *s, dtype="float32": lk.zeros(*s, dtype=dtype, device=device)   # noqa: E731
    return [
        ("add", lk.ShapeError, lambda: t(2, 3) + t(2, 4), "(2, 3)"),
        ("matmul", lk.ShapeError, lambda: t(2, 3) @ t(2, 3), "(2, 3)"),
        ("matmul", lk.ShapeError, lambda: lk.matmul(t(), t(3)), "()"),
        ("reshape", lk.ShapeError, lambda: t(2, 3).reshape(4), "(2, 3)"),
        ("permute", lk.ShapeError, lambda: t(2, 3).permute(0, 0), "(2, 3)"),
        ("broadcast_to", lk.ShapeError, lambda: lk.broadcast_to(t(2, 3), shape=(3, 3)),
         "(2, 3)"),
        ("concat", lk.ShapeError, lambda: lk.concat(t(2, 3), t(3, 2)), "(2, 3)"),
        ("concat", lk.ShapeError, lambda: lk.concat(t(), t()), "()"),
        ("sum", lk.ShapeError, lambda: t(2, 3).sum(dim=2), "(2, 3)"),
        ("sum", lk.ShapeError, lambda: t().sum(dim=1), "()"),
        ("argmax", lk.ShapeError, lambda: lk.argmax(t(2, 3), dim=-3), "(2, 3)"),
        ("max", lk.ShapeError, lambda: lk.max(t(0, 3)), "(0, 3)"),
        ("argmax", lk.ShapeError, lambda: lk.argmax(t(0)), "(0,)"),
        ("sub", lk.DTypeError, lambda: t(2, dtype="bool_") - t(2, dtype="bool_"), "(2,)"),
        ("neg", lk.DTypeError, lambda: -t(2, dtype="bool_"), "(2,)"),
        ("pow", lk.DTypeError, lambda: t(2, dtype="bool_") ** t(2, dtype="bool_"), "(2,)"),
        ("getitem", lk.ShapeError, lambda: t(2, 3)[5], "(2, 3)"),
        ("getitem", lk.ShapeError, lambda: t(2, 3)[t(2)], "(2, 3)"),
        ("gather", lk.ShapeError, lambda: lk.gather(t(2, 3), 1, t(2, 2, dtype="int64")[None]),
         "(2, 3)"),
        ("gather", lk.ShapeError, lambda: lk.gather(t(2, 3), 1, t(2, 2)), "(2, 2)"),
        ("scatter_add", lk.ShapeError,
         lambda: lk.scatter_add(t(2, 3), 1, t(2, 2, dtype="int64"), t(2, 3)), "(2, 2)"),
        ("conv2d", lk.ShapeError, lambda: lk.conv2d(t(1, 2, 4, 4), t(3, 1, 3, 3)),
         "(1, 2, 4, 4)"),
        ("max_pool2d", lk.ShapeError, lambda: lk.max_pool2d(t(1, 1, 2, 2), 5, padding=1),
         "(1, 1, 2, 2)"),
        ("conv2d", lk.ShapeError, lambda: lk.conv2d(t(1, 1, 2, 2), t(1, 1, 3, 3)),
         "(1, 1, 2, 2)"),
        ("avg_pool2d", lk.ShapeError, lambda: lk.avg_pool2d(t(2, 2, 2), 2), "(2, 2, 2)"),
        ("unfold", lk.ShapeError, lambda: unfold(t(1, 1, 2, 2), kernel_size=(3, 3),
                                                 stride=(1, 1), padding=(0, 0),
                                                 dilation=(1, 1)), "(1, 1, 2, 2)"),
        ("logsumexp", lk.ShapeError, lambda: lk.logsumexp(t(2, 3), dim=-3), "(2, 3)"),
        ("scatter_add", lk.ShapeError,
         lambda: lk.scatter_add(t(2, 3), 2, t(2, 3, dtype="int64"), t(2, 3)), "(2, 3)"),
        ("gather", lk.ShapeError, lambda: lk.gather(t(2, 3), -3, t(2, 3, dtype="int64")),
         "(2, 3)"),
        ("mean", lk.ShapeError, lambda: lk.mean(t(2, 3), dim=(0, -2)), "(2, 3)"),
        ("softmax", lk.ShapeError, lambda: lk.softmax(t(2, 3), dim=2), "(2, 3)"),
        ("squeeze", lk.ShapeError, lambda: lk.squeeze(t(2, 3), dim=3), "(2, 3)"),
        ("flatten", lk.ShapeError, lambda: lk.flatten(t(2, 3, 4), 2, 0), "(2, 3, 4)"),
        ("split", lk.ShapeError, lambda: lk.split(t(5), [2, 2]), "(5,)"),
        ("stack", lk.ShapeError, lambda: lk.stack([t(2), t(3)]), "(2,)"),
        ("transpose", lk.ShapeError, lambda: lk.transpose(t(2, 3), 0, 2), "(2, 3)"),
    ]


def test_errors_name_op_shapes_dtypes_devices(device):
    for name, kind, call, shape_text in _err_cases(device):
        assert_clear_error(kind, call, name, shape_text, device)


def test_device_mismatch_error_names_devices():
    before = sum(d.type == "cpu" for d in lk.devices())
    lk.devices.configure(cpus=max(before, 2))
    try:
        a = lk.ones(2, device="cpu:0")
        b = lk.ones(2, device="cpu:1")
        with pytest.raises(lk.DeviceError, match=r"add.*cpu:0.*cpu:1.*\.to\("):
            a + b
    finally:
        lk.devices.configure(cpus=before)
