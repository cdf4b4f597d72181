"""Reverse mode over the eager tape: .backward(), accumulation, graph freeing, errors, no_grad,
fan-in and broadcasting, indexing, memory, deep graphs."""
import gc
import sys
import threading
import weakref

import numpy as np
import pytest

import labkit as lk


def t(data, device, dtype="float64", requires_grad=True):
    return lk.tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)


# ---- accumulation, retain_graph, freed graphs ---------------------------------------------
def test_backward_accumulates_into_grad(device):
    x = t([1.0, 2.0, 3.0], device)
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0, 6.0])
    (x * 3.0).sum().backward()                 # a new graph: adds to .grad
    np.testing.assert_allclose(x.grad.numpy(), [5.0, 7.0, 9.0])
    assert x.grad.dtype is lk.float64 and x.grad.device is x.device
    assert not x.grad.requires_grad and x.grad.is_leaf
    x.grad = None
    (x * 2.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0, 2.0])


def test_backward_only_fills_leaves(device):
    x = t([1.0, 2.0], device)
    h = x * 2.0
    (h * h).sum().backward()
    assert h.grad is None and not h.is_leaf
    np.testing.assert_allclose(x.grad.numpy(), [8.0, 16.0])


def test_retain_graph_allows_a_second_backward(device):
    x = t([1.0, -2.0], device)
    y = (x * x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * 3 * np.array([1.0, 4.0]))


def test_second_backward_through_freed_graph_raises(device):
    x = t([1.0, 2.0], device)
    y = (x.exp() * 2.0).sum()
    y.backward()
    with pytest.raises(lk.GradError) as info:
        y.backward()
    msg = str(info.value)
    assert "second time" in msg and "retain_graph=True" in msg and "'sum'" in msg
    # a new graph that reuses a freed part of the old one fails the same way
    x2 = t([1.0], device)
    h = x2.exp()
    (h * 2.0).sum().backward()
    with pytest.raises(lk.GradError, match="exp"):
        (h * 3.0).sum().backward()


def test_backward_frees_saved_values(device):
    x = t([1.0, 2.0], device)
    h = x.tanh()
    y = (h * h).sum()
    node = h._node
    y.backward()
    assert node.freed and node.inputs is None and node.out is None
    x2 = t([1.0, 2.0], device)
    h2 = x2.tanh()
    (h2 * h2).sum().backward(retain_graph=True)
    assert not h2._node.freed


def test_backward_on_non_scalar_needs_gradient(device):
    x = t([1.0, 2.0], device)
    y = x * 3.0
    with pytest.raises(lk.GradError, match=r"shape \(2,\).*gradient"):
        y.backward()
    y.backward(gradient=lk.tensor([1.0, 10.0], dtype="float64", device=device))
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 30.0])
    with pytest.raises(lk.GradError, match="does not match"):
        (x * 3.0).backward(gradient=lk.ones(3, dtype="float64", device=device))


def test_backward_of_single_element_non_0d(device):
    x = t([[2.0]], device)
    (x * x).backward()
    np.testing.assert_allclose(x.grad.numpy(), [[4.0]])


def test_backward_without_requires_grad_raises(device):
    x = lk.tensor([1.0, 2.0], device=device)
    with pytest.raises(lk.GradError, match="requires_grad=True"):
        (x * 2.0).sum().backward()


def test_requires_grad_on_integer_tensor_raises(device):
    with pytest.raises(lk.DTypeError, match="floating-point"):
        lk.tensor([1, 2], device=device, requires_grad=True)
    with pytest.raises(lk.DTypeError, match="int32"):
        lk.tensor([1, 2], dtype="int32", device=device).requires_grad_()
    with pytest.raises(lk.DTypeError):
        lk.zeros(2, dtype="bool_", device=device, requires_grad=True)
    with pytest.raises(lk.DTypeError, match="float"):
        lk.grad(lambda x: (x * 2).sum())(lk.tensor([1, 2], device=device))


def test_non_leaf_requires_grad_cannot_be_cleared(device):
    x = t([1.0], device)
    y = x * 2.0
    with pytest.raises(lk.GradError, match="detach"):
        y.requires_grad = False


def test_leaf_backward_and_detach(device):
    x = t([1.0, 2.0], device)
    (x.detach() * x).sum().backward()        # the detached factor is a constant
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 2.0])
    assert not x.detach().requires_grad


def test_integer_inputs_get_no_gradient(device):
    x = t([1.0, 2.0, 3.0], device)
    k = lk.tensor([2, 3, 4], device=device)
    (x * k).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 3.0, 4.0])
    assert k.grad is None


def test_gradient_dtype_follows_the_leaf(device):
    x = t([1.0, 2.0], device, dtype="float32")
    w = t([0.5, 0.25], device, dtype="float64")
    (x * w).sum().backward()                 # the product is float64
    assert x.grad.dtype is lk.float32 and w.grad.dtype is lk.float64
    np.testing.assert_allclose(x.grad.numpy(), [0.5, 0.25])
    h = t([1.0, 2.0], device, dtype="float16")
    (h.double() * 3.0).sum().backward()
    assert h.grad.dtype is lk.float16


# ---- no_grad ----------------------------------------------------------------------------------
def test_no_grad_records_nothing(device):
    x = t([1.0, 2.0], device)
    with lk.no_grad():
        assert not lk.is_grad_enabled()
        y = x * 2.0
        with lk.enable_grad():
            z = x * 3.0
    assert lk.is_grad_enabled()
    assert not y.requires_grad and y.is_leaf
    assert z.requires_grad
    with pytest.raises(lk.GradError):
        y.sum().backward()


def test_no_grad_as_decorator_is_reentrant(device):
    @lk.no_grad()
    def recurse(x, n):
        assert not lk.is_grad_enabled()
        return x if n == 0 else recurse(x * 1.0, n - 1)

    y = recurse(t([1.0], device), 3)
    assert not y.requires_grad
    assert lk.is_grad_enabled()
    ctx = lk.no_grad()
    with ctx:
        with ctx:                            # one instance entered twice
            pass
        assert not lk.is_grad_enabled()
    assert lk.is_grad_enabled()


def test_no_grad_restores_state_after_an_exception():
    with pytest.raises(ZeroDivisionError):
        with lk.no_grad():
            1 / 0
    assert lk.is_grad_enabled()


def test_no_grad_is_per_thread():
    seen = []
    with lk.no_grad():
        th = threading.Thread(target=lambda: seen.append(lk.is_grad_enabled()))
        th.start()
        th.join()
    assert seen == [True]


# ---- fan-in and broadcasting -----------------------------------------------------------------
def test_fan_in_gradients_add(device):
    x = t([1.0, 2.0], device)
    a = x * 2.0
    y = (a * a + a + x).sum()             # a used three times, x twice
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * (2 * 2.0 * np.array([1.0, 2.0])) + 2 + 1)


def test_same_tensor_as_both_operands(device):
    x = t([3.0], device)
    (x * x).backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0])
    y = t([3.0], device)
    (y + y + y).backward()
    np.testing.assert_allclose(y.grad.numpy(), [3.0])


def test_diamond_graph(device):
    x = t([0.5, -1.5], device)
    h = x.tanh()
    y = (h.exp() * h.sigmoid()).sum()
    y.backward()
    hv = np.tanh(x.detach().numpy())
    sig = 1 / (1 + np.exp(-hv))
    expected = (np.exp(hv) * sig + np.exp(hv) * sig * (1 - sig)) * (1 - hv ** 2)
    np.testing.assert_allclose(x.grad.numpy(), expected)


def test_broadcasting_gradients_sum_back(device):
    a = t(np.arange(3.0).reshape(3, 1), device)
    b = t(np.arange(4.0).reshape(1, 4), device)
    c = t(2.0, device)                    # 0-d
    d = t(np.ones((2, 1, 4)), device)     # adds a leading dimension
    y = ((a * b + c) * d).sum()
    y.backward()
    assert a.grad.shape == (3, 1) and b.grad.shape == (1, 4) and c.grad.shape == ()
    assert d.grad.shape == (2, 1, 4)
    np.testing.assert_allclose(a.grad.numpy(), 2 * np.full((3, 1), 6.0))
    np.testing.assert_allclose(b.grad.numpy(), 2 * np.full((1, 4), 3.0))
    np.testing.assert_allclose(c.grad.numpy(), 2 * 12.0)
    np.testing.assert_allclose(d.grad.numpy(), np.broadcast_to(
        (np.arange(3.0)[:, None] * np.arange(4.0) + 2).sum(0), (2, 1, 4)))


def test_broadcast_with_python_scalars_and_size_zero(device):
    x = t(np.ones((0, 3)), device)
    w = t(np.ones(3), device)
    (x * w + 1.0).sum().backward()
    assert x.grad.shape == (0, 3)
    np.testing.assert_allclose(w.grad.numpy(), np.zeros(3))


# ---- indexing ----------------------------------------------------------------------------------
INDEXES = [
    ("int", lambda idx: 1),
    ("negative int", lambda idx: -1),
    ("slice", lambda idx: (slice(1, None), slice(None, None, 2))),
    ("reversed slice", lambda idx: (Ellipsis, slice(None, None, -1))),
    ("None and Ellipsis", lambda idx: (None, Ellipsis, 0, None)),
    ("int array with repeats", lambda idx: idx(np.array([0, 2, 2, 0, 2]))),
    ("two int arrays", lambda idx: (idx(np.array([1, 1, 0])), slice(None),
                                    idx(np.array([3, 3, 0])))),
    ("list with repeats", lambda idx: [2, 2, 1]),
    ("boolean mask", lambda idx: idx(np.array([[True, False, True], [False, False, True],
                                                [True, True, True]]))),
    ("leading boolean mask", lambda idx: (idx(np.array([True, False, True])), 1)),
    ("empty int array", lambda idx: idx(np.zeros(0, np.int64))),
]


@pytest.mark.parametrize("name,make", INDEXES, ids=[n for n, _ in INDEXES])
def test_indexing_gradients(name, make, device):
    rng = np.random.default_rng(0)
    base = rng.standard_normal((3, 3, 4))
    x = t(base, device)
    index = make(lambda a: lk.tensor(a, device=device))
    np_index = make(lambda a: a)
    out = x[index]
    np.testing.assert_allclose(out.detach().numpy(), base[np_index])
    g = rng.standard_normal(out.shape)
    out.backward(gradient=lk.tensor(g, device=device))
    expected = np.zeros_like(base)
    np.add.at(expected, np_index, g)     # repeated indices accumulate
    np.testing.assert_allclose(x.grad.numpy(), expected)
    assert lk.gradcheck(lambda x: x[index], [x])


def test_indexing_gradient_of_gradient(device):
    x = t([1.0, 2.0, 3.0], device)
    idx = lk.tensor([2, 2, 0], device=device)
    f = lambda x: (x[idx] ** 3).sum()                           # noqa: E731
    hess_diag = lk.grad(lambda x: (lk.grad(f)(x) * lk.ones(3, dtype="float64",
                                                            device=device)).sum())(x)
    np.testing.assert_allclose(hess_diag.detach().numpy(), [6 * 1.0, 0.0, 2 * 6 * 3.0])


# ---- memory: the tape goes when the output goes -----------------------------------------------
def test_tape_is_freed_when_the_output_is_dropped(device):
    x = t(np.ones(4), device)
    h = x.exp()
    y = (h * 2.0).sum()
    inner, outer = weakref.ref(h._node), weakref.ref(y._node)
    del h
    assert inner() is not None           # still reachable from y's tape
    del y
    assert outer() is None and inner() is None   # reference counting alone, no gc pass
    assert x.grad is None


def test_tape_is_freed_after_backward_and_drop(device):
    x = t(np.ones(4), device)
    y = (x.tanh() * x).sum()
    node = weakref.ref(y._node)
    y.backward()
    del y
    assert node() is None


def test_grad_transform_keeps_no_tape(device):
    x = t(np.ones(3), device, requires_grad=False)
    seen = []

    def f(x):
        y = x.exp()
        seen.append(weakref.ref(y._node))
        return y.sum()

    g = lk.grad(f)(x)
    assert seen[0]() is None
    assert g._node is None and not g.requires_grad


# ---- deep graphs: no recursion --------------------------------------------------------------
def test_deep_chain_backprops_without_recursion(device):
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)          # far below the depth of the graph
    try:
        x = t([1.0, 2.0], device)
        y = x
        for _ in range(5000):
            y = y * 1.0001 + 0.0
        y.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), [1.0001 ** 5000] * 2, rtol=1e-9)
        deep = weakref.ref(y._node)
        del y                              # 10,000 nodes freed by a chain of decrefs
        assert deep() is None
    finally:
        sys.setrecursionlimit(limit)


def test_deep_chain_dropped_without_backward(device):
    x = t([1.0], device)
    y = x
    for _ in range(20000):
        y = y + 1.0
    node = weakref.ref(y._node)
    del y
    gc.collect()
    assert node() is None


def test_wide_fan_in(device):
    x = t([1.0, 2.0], device)
    total = lk.zeros(2, dtype="float64", device=device)
    for i in range(500):
        total = total + x * float(i)
    total.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [sum(range(500))] * 2)


def test_each_grad_is_its_own_writable_array(device):
    a = t([1.0, 2.0], device)
    b = t([3.0, 4.0], device)
    ((a + b) * 2.0).sum().backward()          # add hands the same cotangent to a and b
    s = t([1.0, 2.0, 3.0], device)
    s.sum().backward()                        # sum's vjp is a read-only broadcast view
    grads = [a.grad, b.grad, s.grad]
    for g in grads:
        g._data[...] = 0.0                    # in-place update of one gradient (e.g. zeroing)
    assert float(abs(a.grad).sum().item()) == 0.0
    c = t([1.0, 2.0], device)
    d = t([3.0, 4.0], device)
    (c + d).sum().backward()
    c.grad._data[...] = 7.0
    np.testing.assert_allclose(d.grad.numpy(), [1.0, 1.0])


def test_grad_does_not_alias_the_given_gradient(device):
    x = t([1.0, 2.0], device)
    gradient = lk.tensor([5.0, 6.0], dtype="float64", device=device)
    (x + 0.0).backward(gradient=gradient)
    x.grad._data[...] = 0.0
    np.testing.assert_allclose(gradient.numpy(), [5.0, 6.0])


def test_gradient_conventions_at_kinks(device):
    x = t([-1.0, 0.0, 2.0], device)
    np.testing.assert_allclose(lk.grad(lambda x: lk.relu(x).sum())(x).numpy(), [0.0, 0.0, 1.0])
    np.testing.assert_allclose(lk.grad(lambda x: abs(x).sum())(x).detach().numpy(), [-1.0, 0.0, 1.0])
    ties = t([1.0, 3.0, 3.0], device)
    np.testing.assert_allclose(lk.grad(lambda x: lk.max(x))(ties).numpy(), [0.0, 0.5, 0.5])
    # along a dim, as in PyTorch, the gradient goes to the index min/max returns
    np.testing.assert_allclose(
        lk.grad(lambda x: lk.min(x, dim=0).values)(t([2.0, 2.0], device)).numpy(), [1.0, 0.0])
    # elementwise, as in PyTorch, a tie splits the gradient evenly
    a, b = t([1.0, 2.0], device), t([1.0, 1.0], device)
    ga, gb = lk.grad(lambda a, b: lk.maximum(a, b).sum(), argnums=(0, 1))(a, b)
    np.testing.assert_allclose(ga.numpy(), [0.5, 1.0])
    np.testing.assert_allclose(gb.numpy(), [0.5, 0.0])
    ga, gb = lk.grad(lambda a, b: lk.minimum(a, b).sum(), argnums=(0, 1))(a, b)
    np.testing.assert_allclose(ga.numpy(), [0.5, 0.0])
    np.testing.assert_allclose(gb.numpy(), [0.5, 1.0])
    # clamp gives the whole gradient to its input at a tie with a bound
    np.testing.assert_allclose(lk.grad(lambda x: x.clamp(0.0, 2.0).sum())(
        t([0.0, 2.0, 3.0], device)).numpy(), [1.0, 1.0, 0.0])


def test_a_leaf_broadcast_at_every_step_is_reduced_once(monkeypatch):
    from labkit.autodiff import engine
    calls = []
    real = engine.sum_to_shape

    def counting(g, shape):
        calls.append(tuple(shape))
        return real(g, shape)
    monkeypatch.setattr(engine, "sum_to_shape", counting)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((3, 4)) for _ in range(10)]
    b0 = rng.standard_normal(4)
    b = lk.tensor(b0, requires_grad=True)
    loss = lk.tensor(0.0)
    for x in xs:
        loss = loss + (lk.tensor(x) + b).tanh().sum()
    loss.backward()
    want = sum((1 - np.tanh(x + b0) ** 2).sum(axis=0) for x in xs)
    np.testing.assert_allclose(b.grad.numpy(), want, rtol=1e-12)
    assert calls.count((4,)) == 1        # ten broadcast cotangents, added, then reduced once


def test_a_leaf_used_broadcast_and_whole_gets_both_cotangents():
    b = lk.tensor([1.0, 2.0], requires_grad=True)
    x = lk.ones((3, 2))
    ((x + b) * 2.0).sum().backward(retain_graph=True)
    np.testing.assert_allclose(b.grad.numpy(), [6.0, 6.0])
    b.grad = None
    ((x + b).sum() + (b * b).sum() + (x * b).sum()).backward()
    np.testing.assert_allclose(b.grad.numpy(), [3.0 + 2.0 + 3.0, 3.0 + 4.0 + 3.0])
    g = lk.grad(lambda b: ((x + b) ** 2).sum() + b.sum())(lk.tensor([1.0, 2.0]))
    np.testing.assert_allclose(g.numpy(), [2 * 3 * 2.0 + 1, 2 * 3 * 3.0 + 1])


def test_slices_of_a_sequence_accumulate_in_place_without_tensor_sized_temporaries(monkeypatch):
    from labkit.tensor.ops import index
    calls = []
    real = index.index_add.kernel
    monkeypatch.setattr(index.index_add, "kernel", lambda *a, **k: calls.append(1) or real(*a, **k))
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((50, 3, 4))
    x = lk.tensor(x0, requires_grad=True)
    w = lk.tensor(rng.standard_normal((4, 4)), requires_grad=True)
    h = lk.zeros((3, 4), dtype="float64")
    for t in range(50):
        h = (x[t] @ w + h).tanh()
    (h.sum() + x[::2, 0].sum() + x[[1, 1, 3]].sum()).backward()
    assert calls == []                          # no zeros-and-copy per slice
    # the same gradient through the plain vjp rule (as a recorded backward takes it)
    monkeypatch.setattr(index._getitem, "vjp_into", None)
    x2 = lk.tensor(x0, requires_grad=True)
    h = lk.zeros((3, 4), dtype="float64")
    for t in range(50):
        h = (x2[t] @ w + h).tanh()
    (h.sum() + x2[::2, 0].sum() + x2[[1, 1, 3]].sum()).backward()
    assert len(calls) == 52
    np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_a_gradient_handed_on_by_a_vjp_is_not_added_into_in_place():
    # P's gradient (built in place from P's slices) reaches A and B as one array through add's
    # vjp; A's own slice must not then be added into the array B holds too
    u = lk.tensor(np.ones((3, 4)), requires_grad=True)
    v = lk.tensor(np.ones((3, 4)), requires_grad=True)
    a, b = u * 1.0, v * 1.0
    p = a + b
    (p[0].sum() + 2.0 * p[1].sum() + 3.0 * a[2].sum() + 5.0 * b[0].sum()).backward()
    np.testing.assert_allclose(u.grad.numpy(), [[1.0] * 4, [2.0] * 4, [3.0] * 4])
    np.testing.assert_allclose(v.grad.numpy(), [[6.0] * 4, [2.0] * 4, [0.0] * 4])


@pytest.mark.parametrize("leaf", [True, False])
def test_a_tensor_used_at_every_step_sums_its_cotangents_in_place(leaf, monkeypatch):
    # its second cotangent makes one sum (an op); the others are added into that sum's array,
    # with the same gradient as a sum per step, and a .grad that aliases nothing else
    from labkit.autodiff import engine
    adds = []
    real = engine.add
    monkeypatch.setattr(engine, "add", lambda a, b: adds.append(1) or real(a, b))
    rng = np.random.default_rng(1)
    w0, x0 = rng.standard_normal((4, 4)), rng.standard_normal((10, 3, 4))
    w_leaf = lk.tensor(w0, requires_grad=True)
    w = w_leaf if leaf else w_leaf * 1.0
    h = lk.zeros((3, 4), dtype="float64")
    for t in range(10):
        h = (lk.tensor(x0[t]) @ w + h).tanh()
    h.sum().backward()
    assert len(adds) == 1
    got = w_leaf.grad.numpy().copy()
    # the same gradient with every cotangent added out of place (create_graph builds each sum)
    w2 = lk.tensor(w0, requires_grad=True)
    h = lk.zeros((3, 4), dtype="float64")
    for t in range(10):
        h = (lk.tensor(x0[t]) @ (w2 if leaf else w2 * 1.0) + h).tanh()
    adds.clear()
    (g,) = lk.autodiff.engine.gradients(h.sum(), [w2], create_graph=True)
    assert len(adds) == 9                        # (ten tensors w2 * 1.0 add up at w2 too)
    np.testing.assert_allclose(got, g.detach().numpy(), rtol=1e-12, atol=1e-14)
    # a second backward adds into .grad, which holds the summed array: nothing else writes it
    w = w_leaf if leaf else w_leaf * 1.0
    h = lk.zeros((3, 4), dtype="float64")
    for t in range(10):
        h = (lk.tensor(x0[t]) @ w + h).tanh()
    h.sum().backward()
    np.testing.assert_allclose(w_leaf.grad.numpy(), 2 * got, rtol=1e-12, atol=1e-14)
