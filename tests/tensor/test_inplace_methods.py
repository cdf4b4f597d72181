"""In-place methods (``x.add_(y)``, ``x += y``...) against PyTorch: values, gradients through
them, the errors PyTorch gives, views, and graph capture."""
import numpy as np
import pytest
import torch

import labkit as lk

RNG = np.random.default_rng(0)
A = RNG.standard_normal((2, 3))
B = RNG.uniform(0.5, 2.0, (2, 3))
ROW = RNG.standard_normal(3)
SQUARE = RNG.standard_normal((3, 3))

# (name, args as NumPy arrays or numbers, kwargs): x.<name>_(*args, **kwargs) on x = B
CALLS = [
    ("add", (A,), {}), ("add", (ROW,), {"alpha": 2.0}), ("sub", (1.5,), {}),
    ("sub", (A,), {"alpha": 0.5}), ("mul", (A,), {}), ("mul", (2.0,), {}), ("div", (B,), {}),
    ("div", (3.0,), {}), ("pow", (2.0,), {}), ("pow", (B,), {}), ("exp", (), {}),
    ("neg", (), {}), ("abs", (), {}), ("sqrt", (), {}), ("clamp", (), {"min": 0.8}),
    ("clamp", (0.7, 1.2), {}), ("zero", (), {}), ("fill", (3.5,), {}), ("copy", (A,), {}),
    ("copy", (ROW,), {}), ("sigmoid", (), {}), ("tanh", (), {}),
]


def _args(args, lib):
    return [lib.tensor(a) if isinstance(a, np.ndarray) else a for a in args]


@pytest.mark.parametrize("name,args,kwargs", CALLS, ids=[f"{c[0]}_{i}" for i, c in
                                                         enumerate(CALLS)])
def test_inplace_method_values_match_torch(name, args, kwargs):
    x, t = lk.tensor(B), torch.tensor(B)
    alias = x
    out = getattr(x, f"{name}_")(*_args(args, lk), **kwargs)
    getattr(t, f"{name}_")(*_args(args, torch), **kwargs)
    assert out is x and alias is x
    assert x.dtype.np == t.numpy().dtype
    np.testing.assert_allclose(x.numpy(), t.numpy(), rtol=1e-12, atol=1e-12)


def test_augmented_assignment_updates_in_place_as_in_torch():
    x, t = lk.tensor(B), torch.tensor(B)
    same = x
    x += lk.tensor(A)
    x -= 1.0
    x *= 2
    x /= lk.tensor(B)
    x **= 2
    t += torch.tensor(A)
    t -= 1.0
    t *= 2
    t /= torch.tensor(B)
    t **= 2
    assert same is x
    np.testing.assert_allclose(x.numpy(), t.numpy(), rtol=1e-12)
    i = lk.tensor([1, 2, 3])
    i += 2
    i *= 3
    assert i.dtype is lk.int64 and i.tolist() == [9, 12, 15]


def test_gradients_through_a_chain_of_inplace_ops_match_torch():
    xs = [lib.tensor(B, requires_grad=True) for lib in (lk, torch)]
    zs = [lib.tensor(A, requires_grad=True) for lib in (lk, torch)]
    grads = []
    for lib, x, z in zip((lk, torch), xs, zs):
        a = x * 1
        a.mul_(z)            # needs a's old value for z's gradient
        a.add_(z, alpha=2.0)
        a.clamp_(max=3.0)
        a.exp_()
        b = a.sum() + (x * x).sum()
        b.backward()
        grads.append((x.grad.numpy(), z.grad.numpy()))
    for g_lk, g_torch in zip(*grads):
        np.testing.assert_allclose(g_lk, g_torch, rtol=1e-10)


def test_copy_into_a_tensor_carries_the_gradient_to_the_source():
    for lib in (lk, torch):
        src = lib.tensor(A, requires_grad=True)
        y = lib.zeros(2, 3, dtype=lib.float64)
        y.copy_(src * 2)
        (y * y).sum().backward()
        np.testing.assert_allclose(src.grad.numpy(), 8 * A)


def test_a_leaf_that_requires_grad_cannot_change_in_place_outside_no_grad():
    w = lk.ones(3, requires_grad=True)
    with pytest.raises(lk.GradError, match=r"add_: .* leaf that requires grad.*lk\.no_grad"):
        w.add_(1)
    with pytest.raises(lk.GradError, match="mul_"):
        w *= 2
    assert w.tolist() == [1.0, 1.0, 1.0]          # nothing was written
    with lk.no_grad():
        w.sub_(0.5)
    w.data.mul_(2)                                # through .data: allowed, as in PyTorch
    assert w.tolist() == [1.0, 1.0, 1.0] and w.is_leaf and w.requires_grad


@pytest.mark.parametrize("write", [lambda w: w[0].add_(1), lambda w: w.t()[1:].mul_(2),
                                   lambda w: w.reshape(6).__setitem__(2, 5.0),
                                   lambda w: w[:, 1].copy_(lk.zeros(2))],
                         ids=["getitem", "t_then_slice", "setitem_into_reshape", "copy_into_column"])
def test_a_view_of_a_leaf_that_requires_grad_cannot_change_in_place_outside_no_grad(write):
    w = lk.ones((2, 3), requires_grad=True)
    with pytest.raises(lk.GradError, match=r"_: .* is a view of .*shape=\(2, 3\).* a leaf that "
                                           r"requires grad.*lk\.no_grad"):
        write(w)
    assert w.tolist() == [[1.0] * 3] * 2 and w.is_leaf        # nothing was written
    with lk.no_grad():
        write(w)
    assert w.is_leaf and w.requires_grad and w.tolist() != [[1.0] * 3] * 2


def test_a_view_of_a_leaf_made_under_no_grad_cannot_change_in_place_with_grad_on():
    w = lk.ones((2, 3), requires_grad=True)
    with lk.no_grad():
        v = w[0]
    with pytest.raises(lk.GradError, match=r"mul_: .* is a view of .* a leaf that requires grad"):
        v.mul_(2)
    assert w.tolist() == [[1.0] * 3] * 2 and w.is_leaf


def test_a_write_through_a_view_of_a_tensor_that_needs_no_grad_reaches_it_as_in_torch():
    def program(L, x):
        b = L.zeros((2, 3), dtype=x.dtype)
        b[1, :2].copy_(x[:2] * 2.0)           # a view made while nothing required grad
        b.t()[2].mul_(x[1])
        return (b * b).sum() + x.sum()
    x = lk.tensor([1.0, 2.0, 3.0], dtype=lk.float64, requires_grad=True)
    xt = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    program(lk, x).backward()
    program(torch, xt).backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("through_a_view", [False, True])
def test_a_view_made_before_a_write_gave_its_base_a_gradient_has_it_as_in_torch(through_a_view):
    def program(L, x):
        b = L.zeros(6, dtype=x.dtype)
        u, top = b[2:], b[:4].reshape(2, 2)          # made while nothing required grad
        if through_a_view:
            b.narrow(0, 0, 3).copy_(x * 2.0)
        else:
            b.copy_(L.cat([x, x]))
        assert u.requires_grad and top.requires_grad  # their history now is their base's
        return (u * u).sum() + (top * x[0]).sum()
    x = lk.tensor([1.0, 2.0, 3.0], dtype=lk.float64, requires_grad=True)
    xt = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    program(lk, x).backward()
    program(torch, xt).backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12)


def test_an_inplace_op_after_exp_keeps_exps_gradient_right():
    """PyTorch refuses this (exp_'s gradient needs its output, which clamp_ changes); labkit's
    in-place ops keep their result's own memory for the tape, so the gradient is the
    out-of-place one."""
    x = lk.tensor(B, requires_grad=True)
    a = (x * 1).exp_()
    a.clamp_(max=3.0)
    a.sum().backward()
    t = torch.tensor(B, requires_grad=True)
    t.exp().clamp(max=3.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12)


def test_changing_a_saved_value_in_place_names_the_op_and_the_versions():
    x = lk.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    y.add_(1.0)
    y.mul_(2.0)
    with pytest.raises(lk.GradError, match=r"backward through exp: .* its output .* modified by "
                                           r"an in-place operation .* at version 2; exp saved "
                                           r"version 0"):
        y.sum().backward()


def test_results_that_do_not_fit_are_refused_and_leave_the_tensor_alone():
    x = lk.zeros(3)
    with pytest.raises(lk.ShapeError, match=r"add_: .* shape \(2, 3\).* cannot change a tensor"):
        x.add_(lk.ones(2, 3))
    i = lk.tensor([1, 2])
    with pytest.raises(lk.DTypeError, match=r"mul_: .*float32 cannot be cast"):
        i.mul_(1.5)
    assert x.tolist() == [0.0, 0.0, 0.0] and i.tolist() == [1, 2]


def test_a_write_through_a_view_changes_the_tensor_viewed():
    x = lk.zeros(2, 3)
    x[0].fill_(5.0)
    x[:, 1].add_(1.0)
    x.view(6)[5].copy_(lk.tensor(7.0))
    np.testing.assert_array_equal(x.numpy(), [[5, 6, 5], [0, 1, 7]])


def _ops_of(fn):
    """The names of the ops that ``fn()`` runs eagerly."""
    from labkit.tensor import dispatch
    mode, names = dispatch._eager_mode, []

    def apply(op, inputs, attrs):
        names.append(op.name)
        return type(mode).apply(mode, op, inputs, attrs)
    mode.apply = apply
    try:
        fn()
    finally:
        del mode.apply
    return names


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_an_update_nothing_records_adds_into_memory_with_torchs_values(dtype):
    # p.data.add_(-lr * p.grad), the hand-written SGD step of PyTorch's examples, and its kin
    w = lk.tensor(B, dtype=dtype, requires_grad=True)
    tw = torch.tensor(B, dtype=getattr(torch, dtype), requires_grad=True)
    g, tg = lk.tensor(A, dtype=dtype), torch.tensor(A, dtype=getattr(torch, dtype))
    data, row = w.data, w.data[1]
    assert _ops_of(lambda: data.add_(-0.1 * g)) == ["mul", "assign_add"]
    assert _ops_of(lambda: data.sub_(g, alpha=0.5)) == ["mul", "assign_sub"]
    assert _ops_of(lambda: data.add_(2.5)) == ["assign_add"]
    data -= lk.tensor(0.25, dtype=dtype)
    data += data                                   # the operand is the tensor itself
    with lk.no_grad():
        assert w.add_(g) is w
    tw.data.add_(-0.1 * tg)
    tw.data.sub_(tg, alpha=0.5)
    tw.data.add_(2.5)
    tw.data -= torch.tensor(0.25, dtype=getattr(torch, dtype))
    tw.data += tw.data
    tw.data.add_(tg)
    np.testing.assert_array_equal(w.detach().numpy(), tw.detach().numpy())
    np.testing.assert_array_equal(row.numpy(), tw.detach().numpy()[1])   # views see it
    assert w.requires_grad and w.grad is None
    y, ty = (w * w).sum(), (tw * tw).sum()
    w.data.add_(1.0)           # through .data: not a version of w, as in PyTorch
    tw.data.add_(1.0)
    y.backward()
    ty.backward()
    np.testing.assert_array_equal(w.grad.numpy(), tw.grad.numpy())
    y = (w * w).sum()          # a value saved for backward, then changed under no_grad
    with lk.no_grad():
        w.sub_(1.0)
    with pytest.raises(lk.GradError, match=r"backward through mul: .* modified by an in-place"):
        y.backward()


def test_updates_off_the_one_op_path_keep_their_values_and_errors():
    # casts, broadcasts of the operand, float16 and integer tensors: the out-of-place sum
    # written back, as before
    h, th = lk.tensor(B, dtype=lk.float16), torch.tensor(B, dtype=torch.float16)
    assert _ops_of(lambda: h.add_(0.1)) == ["add", "assign"]
    th.add_(0.1)
    np.testing.assert_array_equal(h.numpy(), th.numpy())
    x, t = lk.tensor(B, dtype=lk.float32), torch.tensor(B, dtype=torch.float32)
    assert _ops_of(lambda: x.add_(lk.tensor(ROW))) == ["add", "assign"]        # float64 row
    t.add_(torch.tensor(ROW))
    np.testing.assert_array_equal(x.numpy(), t.numpy())
    i = lk.tensor([1, 2])
    i += 3
    assert i.tolist() == [4, 5]
    with pytest.raises(lk.DTypeError, match=r"add_: .*float32 cannot be cast"):
        i.add_(lk.tensor([0.5, 0.5]))
    with pytest.raises(lk.ShapeError, match=r"add_: .* shape \(2, 3\).* cannot change a tensor"):
        lk.zeros(3).add_(lk.ones(2, 3))
    assert i.tolist() == [4, 5]


def test_random_fills_have_the_distribution_asked_for():
    lk.manual_seed(0)
    u = lk.empty(20000).uniform_(-2.0, 4.0) if hasattr(lk, "empty") else \
        lk.zeros(20000).uniform_(-2.0, 4.0)
    n = lk.zeros(20000, dtype=lk.float64).normal_(3.0, 0.5)
    assert -2.0 <= u.min().item() and u.max().item() < 4.0 and abs(u.mean().item() - 1.0) < 0.05
    assert n.dtype is lk.float64
    assert abs(n.mean().item() - 3.0) < 0.02 and abs(n.std().item() - 0.5) < 0.02 \
        if hasattr(n, "std") else abs(n.var().item() - 0.25) < 0.02


def test_captured_inplace_ops_equal_eager():
    def f(x):
        y = x * 2
        y.add_(1.0)
        y.mul_(y)          # reads and writes the same value
        z = y.clone()
        z.clamp_(max=10.0)
        return y + z

    x = lk.tensor(A)
    np.testing.assert_allclose(lk.function(f)(x).numpy(), f(x).numpy())


def test_captured_gradients_through_inplace_ops_match_torch():
    # under capture an in-place op rebinds the symbolic tensor to its result; the op that
    # computed the result must still see the value before the write (a residual block's
    # ``out += shortcut`` lost every gradient upstream of ``out``)
    def loss(x, w):
        a = x @ w
        a += x
        a.mul_(x)
        a[0, 1:] = w[1, 1:] * 3
        a.add_(x, alpha=2.0)
        return (a * a).sum()

    t_w = torch.tensor(SQUARE, requires_grad=True)
    loss(torch.tensor(A), t_w).backward()
    w = lk.tensor(SQUARE, requires_grad=True)

    @lk.function
    def step(x):
        out = loss(x, w)
        out.backward()
        return out
    step(lk.tensor(A))
    np.testing.assert_allclose(w.grad.numpy(), t_w.grad.numpy(), rtol=1e-12)


def test_a_captured_update_of_an_outside_tensor_writes_it_every_call():
    p = lk.tensor([1.0, 2.0])

    @lk.function
    def step(g):
        p.sub_(g * 0.5)
        return p * 1

    first = step(lk.tensor([1.0, 1.0]))
    second = step(lk.tensor([2.0, 2.0]))
    assert first.tolist() == [0.5, 1.5] and second.tolist() == [-0.5, 0.5]
    assert p.tolist() == [-0.5, 0.5]


def test_setitem_writes_as_torch_does():
    x, t = lk.zeros(3, 4), torch.zeros(3, 4)
    for a, lib in ((x, lk), (t, torch)):
        a[0] = 1.0
        a[1, 2:] = lib.tensor([5.0, 6.0])
        a[:, 0] += 2
        a[a > 5] = -1
        a[[0, 2], [1, 3]] = 9
        a[..., -1] *= 2
        a[2, :, None] = lib.tensor([[7.0], [7.0], [7.0], [7.0]])
    np.testing.assert_array_equal(x.numpy(), t.numpy())
    i, ti = lk.zeros(2, dtype=lk.int64), torch.zeros(2, dtype=torch.int64)
    i[0], ti[0] = 1.7, 1.7                       # cast to the tensor's dtype, as PyTorch does
    assert i.tolist() == ti.tolist()


def test_gradients_through_setitem_match_torch():
    grads = []
    for lib in (lk, torch):
        w = lib.tensor(B, requires_grad=True)
        v = lib.tensor(ROW[:2], requires_grad=True)
        h = w * 2
        h[0, 1:] = v * v
        h[h > 3.0] = 0.0
        (h * h).sum().backward()
        grads.append((w.grad.numpy(), v.grad.numpy()))
    for ours, theirs in zip(*grads):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_inplace_forms_of_indexing_methods_match_torch():
    x, t = lk.tensor(B), torch.tensor(B)
    for a, lib in ((x, lk), (t, torch)):
        a.masked_fill_(a > 1.0, 0.5)
        a.index_add_(1, lib.tensor([0, 2]), lib.ones(2, 2, dtype=lib.float64), alpha=2)
        a.scatter_(0, lib.tensor([[1, 0, 1]]), -1.0)
        a.index_fill_(1, lib.tensor([1]), 3.0)
    np.testing.assert_allclose(x.numpy(), t.numpy())


def _writes_saved_input(x):
    y = x * 2
    z = y.sin()          # sin's gradient reads y
    y.add_(1)
    z.sum().backward()
    return z


def _writes_saved_output(x):
    y = x.exp()          # exp's gradient reads its output
    y.mul_(2)
    y.sum().backward()
    return y


def _writes_unread_value(x):
    y = x * 2
    z = y + 1            # add's gradient reads neither
    y.add_(1)
    (z * y).sum().backward()
    return z


@pytest.mark.parametrize("program", [_writes_saved_input, _writes_saved_output])
def test_captured_programs_raise_the_eager_version_error_when_traced(program):
    # under capture an in-place op rebinds its tensor to a new node; a backward pass through an
    # op that saved the old value raises as eagerly (it would otherwise read the new value)
    x = lk.tensor([0.3, 0.5, 0.7], requires_grad=True)
    with pytest.raises(lk.GradError) as eager:
        program(x)
    with pytest.raises(lk.GradError) as captured:
        lk.function(program)(x)
    assert str(captured.value) == str(eager.value)


def test_captured_writes_that_no_gradient_reads_differentiate_as_eagerly():
    x = lk.tensor([0.3, 0.5, 0.7], requires_grad=True)
    _writes_unread_value(x)
    eager = x.grad.numpy().copy()
    x.grad = None
    lk.function(_writes_unread_value)(x)
    np.testing.assert_allclose(x.grad.numpy(), eager, rtol=1e-6)
