"""Captured equals eager, for every op: the generic harness walks the op registry.

For each registered op (and each public composite) it takes the cases of
tests/tensor/op_cases.py (their edge inputs and a few drawn ones) and checks that the op
captured with ``lk.function`` gives the eager result (same shape and dtype, values within
1e-6, in float64 and float32), that in-place ops leave their target as eagerly, and that the
gradient computed *inside* the captured function equals the eager gradient, two ways:
``lk.grad`` of the inputs (fed as placeholders), and ``loss.backward()`` on tensors captured
from outside (their ``.grad`` is set after each run, as in a training step). And each case
under ``lk.vmap``, captured, gives the eager vmap's values.
"""
import importlib

import numpy as np
import pytest

import labkit as lk
from labkit.autodiff import gradients as eager_gradients
from labkit.tensor.op import REGISTRY


def _op_cases():
    """tests/tensor/op_cases.py (shared with the op harness). pytest puts tests/ on sys.path
    (tests/ holds packages, not a package), so it imports as ``tensor.op_cases``, the module the
    op harness uses."""
    return importlib.import_module("tensor.op_cases")


def _case_kit():
    return importlib.import_module("tensor.case_kit")


cases = _op_cases()
BY_OP = {}
for _case in cases.PRIMITIVE_CASES:
    BY_OP.setdefault(_case.op, []).append(_case)
DRAWN = 3           # random samples per case, on top of its edge inputs (fixed seeds)
RTOL = ATOL = 1e-6


# ---- helpers --------------------------------------------------------------------------------
def _samples(case):
    rng = np.random.default_rng(0)
    return [case.sample(rng, p) for p in case.edges] + [
        case.sample(np.random.default_rng(seed), params) for params, seed in _drawn(case)]


def _drawn(case):
    """``DRAWN`` (params, seed) pairs from the case's hypothesis strategy, the same every run."""
    from hypothesis import HealthCheck, Phase, given, settings
    found = []

    @settings(max_examples=DRAWN, derandomize=True, database=None, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(cases.sample_strategy(case))
    def collect(value):
        found.append(value)

    collect()
    return found


def _tensors(sample, dtype=np.float64):
    out = []
    for a in sample.args:
        if isinstance(a, np.ndarray):
            a = a.astype(dtype) if a.dtype.kind == "f" else a
            out.append(lk.tensor(a.copy()))
        else:
            out.append(a)
    return out


def _leaves(out):
    return list(out) if isinstance(out, tuple) else [out]


def _same(eager, captured, where):
    e, c = _leaves(eager), _leaves(captured)
    assert len(e) == len(c), f"{where}: {len(c)} outputs captured, {len(e)} eagerly"
    for a, b in zip(e, c):
        assert b.shape == a.shape, f"{where}: captured shape {b.shape}, eager {a.shape}"
        assert b.dtype is a.dtype, f"{where}: captured dtype {b.dtype}, eager {a.dtype}"
        if a.dtype.is_floating:
            np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=RTOL, atol=ATOL,
                                       equal_nan=True, err_msg=where)
        else:
            np.testing.assert_array_equal(b.numpy(), a.numpy(), err_msg=where)


def _combine(out):
    if isinstance(out, tuple):
        return lk.concat(*[lk.reshape(o, shape=(-1,)) for o in out])
    return out


def _grad_positions(sample):
    if sample.grad is not None:
        return tuple(sample.grad)
    return tuple(i for i, a in enumerate(sample.args)
                 if isinstance(a, np.ndarray) and a.dtype.kind == "f")


def check_values(case, sample, dtype):
    where = f"{case.name} {sample} ({np.dtype(dtype)})"
    kwargs = sample.kwargs
    with np.errstate(all="ignore"):
        eager_args = _tensors(sample, dtype)
        eager = case.fn(*eager_args, **kwargs)
        f = lk.function(lambda *args: case.fn(*args, **kwargs), name=case.name)
        cap_args = _tensors(sample, dtype)
        captured = f(*cap_args)
    _same(eager, captured, where)
    # in-place ops (assign...) leave their targets as eagerly
    for a, b in zip(eager_args, cap_args):
        if isinstance(a, lk.Tensor):
            np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=RTOL, atol=ATOL,
                                       equal_nan=True, err_msg=f"{where}: an input afterwards")
    assert len(f.traces) == 1
    return _data_dependent(f.traces[0].graph)


def _data_dependent(graph):
    """Whether some node's shape is known only at run time (boolean-mask indexing)."""
    return any(n.shape is None or None in n.shape for n in graph.nodes)


def _mask_index(sample):
    """Whether a boolean array indexes (the gradient of index_add's values is then x[mask])."""
    return any(isinstance(a, np.ndarray) and a.dtype == bool for a in sample.args[1:])


def check_gradients(case, sample):
    where = f"{case.name} {sample}"
    kwargs = sample.kwargs
    pos = _grad_positions(sample)
    if not pos:
        return
    with np.errstate(all="ignore"):
        args = _tensors(sample)
        xs = [args[p].requires_grad_() for p in pos]
        out = _combine(case.fn(*args, **kwargs))
        if not np.isfinite(out.detach().numpy()).all():
            return      # no derivative to compare (e.g. a pooling window wholly in padding)
        w = lk.tensor(np.random.default_rng(1).standard_normal(out.shape))
        eager = eager_gradients((out * w).sum(), xs)

        # 1. lk.grad inside the captured function, the inputs fed as placeholders
        def loss(*inputs):
            full = list(inputs[:-1])
            return (_combine(case.fn(*full, **kwargs)) * inputs[-1]).sum()

        f = lk.function(lambda *a: lk.grad(loss, argnums=pos)(*a), name=case.name)
        captured = f(*_tensors(sample), w)
        for p, e, c in zip(pos, eager, captured):
            _same(e, c, f"{where}: lk.grad d/d input {p}")

        # 2. loss.backward() on tensors captured by reference from outside the function
        outside = _tensors(sample)
        for p in pos:
            outside[p].requires_grad_()

        @lk.function
        def backward():
            loss(*outside, w).backward()

        for run in range(2):                 # .grad is set by every run, as eagerly
            for p in pos:
                outside[p].grad = None
            backward()
            for p, e in zip(pos, eager):
                assert outside[p].grad is not None, f"{where}: no .grad after run {run}"
                _same(e, outside[p].grad, f"{where}: backward() d/d input {p}, run {run}")
        assert len(backward.traces) == 1


# ---- the registry is walked ---------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_registered_op_captured_equals_eager(name):
    op_cases = BY_OP.get(name)
    assert op_cases, (f"registered op {name!r} has no case in tests/tensor/op_cases.py, so its "
                      f"capture cannot be checked: add one")
    for case in op_cases:
        for sample in _samples(case):
            check_values(case, sample, np.float32)
            if check_values(case, sample, np.float64) or (
                    name == "index_add" and _mask_index(sample)):
                continue     # see test_ops_after_a_data_dependent_shape below
            if case.differentiable:
                check_gradients(case, sample)


@pytest.mark.parametrize("case", cases.COMPOSITE_CASES, ids=lambda c: c.name)
def test_composite_captured_equals_eager(case):
    for sample in _samples(case):
        if check_values(case, sample, np.float64):
            continue
        if case.differentiable:
            check_gradients(case, sample)


def _stacked(case, sample, params):
    """Two examples of ``case`` (``sample`` and another drawn with the same parameters) with
    every array argument stacked along dim 0; None where a boolean mask is an argument (its
    count of True values may differ between the examples, and shapes with it)."""
    other = case.sample(np.random.default_rng(1), params)
    args = []
    for a, b in zip(sample.args, other.args):
        if isinstance(a, np.ndarray) and (a.dtype == bool or a.shape != b.shape):
            return None
        args.append(np.stack([a, b]) if isinstance(a, np.ndarray) else a)
    return args


@pytest.mark.parametrize("case", cases.ALL_CASES, ids=lambda c: c.name)
def test_vmap_captured_equals_eager(case):
    """Every case's vmap (its batching rules, or the loop for an op without one) captured by
    lk.function gives the eager vmap's values."""
    rng = np.random.default_rng(0)
    for params in case.edges:
        sample = case.sample(rng, params)
        if check_values(case, sample, np.float64):
            continue   # a size known only at run time: per-example results may not stack
        args = _stacked(case, sample, params)
        if args is None:
            continue
        axes = tuple(0 if isinstance(a, np.ndarray) else None for a in args)
        vf = lk.vmap(lambda *xs: case.fn(*xs, **sample.kwargs), in_axes=axes)
        with np.errstate(all="ignore"):
            try:
                eager = vf(*[lk.tensor(a.copy()) if isinstance(a, np.ndarray) else a
                             for a in args])
            except lk.autodiff.DataDependentShapeError as exc:   # refused, captured too
                _case_kit().assert_vmap_refusal(exc)
                with pytest.raises(lk.autodiff.DataDependentShapeError):
                    lk.function(vf, name=f"vmap_{case.name}")(
                        *[lk.tensor(a.copy()) if isinstance(a, np.ndarray) else a for a in args])
                continue
            captured = lk.function(vf, name=f"vmap_{case.name}")(
                *[lk.tensor(a.copy()) if isinstance(a, np.ndarray) else a for a in args])
        _same(eager, captured, f"vmap of {case.name} {sample}")


def test_ops_after_a_data_dependent_shape():
    x = lk.tensor(np.arange(6.0).reshape(2, 3))
    mask = lk.tensor(np.array([[True, False, True], [False, True, True]]))

    @lk.function
    def f(x, mask):
        y = x[mask] * 2.0
        assert y.shape is None or None in y.shape, f"inferred {y.shape} for x[mask] * 2.0"
        return lk.grad(lambda x: (x[mask] * 2.0).sum())(x)

    np.testing.assert_array_equal(f(x, mask).numpy(), 2.0 * mask.numpy())


@pytest.mark.parametrize("dim, keepdim", [(None, False), (0, False), (1, True), ((0, 1), False)])
def test_gradients_through_sums_over_rows_picked_by_a_mask(dim, keepdim):
    rng = np.random.default_rng(0)
    x = lk.tensor(rng.standard_normal((5, 3)))
    rows = lk.tensor(np.array([True, False, True, True, False]))
    w = lk.tensor(rng.standard_normal(3))

    def loss(x, rows):
        picked = x[rows]                             # (None, 3) while tracing
        summed = (picked * w).sum(dim=dim, keepdim=keepdim)
        return (summed ** 2).sum() + picked.mean(dim=dim).sum() + picked.var(dim=0).sum()

    eager = lk.grad(loss)(x, rows)
    captured = lk.function(lk.grad(loss))(x, rows)
    np.testing.assert_allclose(captured.numpy(), eager.numpy(), rtol=1e-12)


def test_gradient_of_index_add_values_under_a_mask():
    from labkit.tensor.ops import index as ops
    x, mask = lk.zeros(2, 3, dtype="float64"), lk.tensor([[True, False, True]] * 2)
    values = lk.tensor([1.0, 2.0, 3.0, 4.0], dtype="float64")

    def loss(values):
        spec, tensors = ops.split_index(x, mask)
        return (ops.index_add(x, values, *tensors, spec=spec) ** 2).sum()

    eager = lk.grad(loss)(values)
    captured = lk.function(lk.grad(loss))(values)
    np.testing.assert_array_equal(captured.numpy(), eager.numpy())


def test_harness_catches_a_capture_that_differs():
    # an op whose kernel gives another value the second time it runs (eager, then captured)
    from labkit.tensor.shape_rules import same_as_first
    calls = []

    def kernel(xp, x):
        calls.append(1)
        return x * (2.0 if len(calls) == 1 else 3.0)

    drifting = lk.op("capture_harness_probe", shape=same_as_first, register=False)(kernel)
    probe = cases.Case("probe", drifting, None, None, None, [])
    with pytest.raises(AssertionError, match="probe"):
        check_values(probe, cases.Sample((np.ones(3),)), np.float64)
    assert "capture_harness_probe" not in REGISTRY
