"""In-place methods whose operand aliases the tensor written: ``c += c``, ``c.mul_(c)``,
``c.add_(c.view(3, 3))``, ``c.index_add_(0, i, c.t())``. The operand is read as it was before the
write, in value and in gradient, eagerly and captured. Gradients are checked against PyTorch: the
same call where PyTorch accepts the aliasing, else the call with the operand cloned first (what
PyTorch asks for, and what labkit does for you)."""
import numpy as np
import pytest
import torch

import labkit as lk

RNG = np.random.default_rng(7)
X = RNG.uniform(0.5, 2.0, (3, 3))             # positive: pow, div, xlogy, hypot stay smooth
W = RNG.standard_normal((3, 3))               # the loss weights, so no symmetry hides an error
IDX = [2, 0, 1]
MASK = [[True, False, True], [False, True, False], [True, True, False]]


def _binary(name, **kw):
    return name, lambda c, a, lib: ((a,), kw)


# (method, build(c, alias, lib) -> (args, kwargs)): every in-place method with a tensor operand
# that may alias the tensor written (float-valued, so it has a gradient)
SPECS = [
    *(_binary(n) for n in ("add", "sub", "mul", "div", "pow", "atan2", "hypot", "fmod",
                           "remainder", "copysign", "xlogy", "true_divide", "multiply",
                           "subtract", "divide", "maximum", "minimum", "copy")),
    _binary("add", alpha=0.5),
    _binary("sub", alpha=2.0),
    ("lerp", lambda c, a, lib: ((a, 0.3), {})),
    ("lerp", lambda c, a, lib: ((a, a), {})),
    ("clamp", lambda c, a, lib: ((), {"min": a})),
    ("clamp", lambda c, a, lib: ((), {"max": a})),
    ("addmm", lambda c, a, lib: ((a, a), {})),
    ("addmm", lambda c, a, lib: ((a, lib.tensor(W)), {"beta": 0.5, "alpha": 2.0})),
    ("index_add", lambda c, a, lib: ((0, lib.tensor(IDX), a), {})),
    ("index_add", lambda c, a, lib: ((1, lib.tensor(IDX), a), {"alpha": 2.0})),
    ("index_copy", lambda c, a, lib: ((0, lib.tensor(IDX), a), {})),
    ("scatter_add", lambda c, a, lib: ((0, lib.tensor([IDX, IDX, IDX]), a), {})),
    ("scatter", lambda c, a, lib: ((1, lib.tensor([IDX, IDX, IDX]), a), {})),
    ("index_put", lambda c, a, lib: (((lib.tensor(IDX),), a), {})),
    ("index_put", lambda c, a, lib: (((lib.tensor(IDX),), a), {"accumulate": True})),
    ("masked_fill", lambda c, a, lib: ((lib.tensor(MASK), a[1, 2]), {})),
    ("fill", lambda c, a, lib: ((a[0, 1],), {})),
]

# how the operand aliases the tensor written: itself, a view of all of it (same layout), a view
# of all of it in another layout, and a view of one row of it expanded over it
ALIASES = {
    "itself": lambda c: c,
    "view": lambda c: c.view(9).view(3, 3),
    "transposed": lambda c: c.t(),
    "row": lambda c: c[1].expand(3, 3),
}

CASES = [(name, build, alias) for name, build in SPECS for alias in ALIASES]
IDS = [f"{n}-{i}-{a}" for i, (n, _, a) in enumerate(CASES)]


def _run(lib, name, build, alias, clone):
    """d(sum(W * c))/dx after ``c = x * 1.5; c.<name>_(<operand aliasing c>)``."""
    def loss(x):
        c = x * 1.5
        a = ALIASES[alias](c)
        args, kwargs = build(c, a.clone() if clone else a, lib)
        getattr(c, f"{name}_")(*args, **kwargs)
        return (c * lib.tensor(W)).sum()
    return loss


def _torch_grad(name, build, alias):
    """PyTorch's gradient, and whether PyTorch accepted the aliased call as it is."""
    for clone in (False, True):
        x = torch.tensor(X, requires_grad=True)
        try:
            if name in ("maximum", "minimum"):     # PyTorch has only the out-of-place form
                def loss(x):
                    c = x * 1.5
                    a = ALIASES[alias](c).clone()
                    return (getattr(torch, name)(c, a) * torch.tensor(W)).sum()
                loss(x).backward()
            else:
                _run(torch, name, build, alias, clone)(x).backward()
        except RuntimeError as e:
            if clone or "memory location" not in str(e) and "modified by an inplace" not in \
                    str(e):
                raise
            continue
        return x.grad.numpy(), not clone
    raise AssertionError("unreachable")


@pytest.mark.parametrize("name,build,alias", CASES, ids=IDS)
def test_inplace_with_an_aliased_operand_has_pytorchs_gradient(name, build, alias):
    expected, _ = _torch_grad(name, build, alias)
    loss = _run(lk, name, build, alias, clone=False)
    x = lk.tensor(X, requires_grad=True)
    loss(x).backward()
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-10, atol=1e-12)
    captured = lk.function(lk.grad(loss))(lk.tensor(X, requires_grad=True))
    np.testing.assert_allclose(captured.numpy(), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name,build,alias", CASES, ids=IDS)
def test_inplace_with_an_aliased_operand_has_the_value_of_a_cloned_one(name, build, alias):
    want = _run(lk, name, build, alias, clone=True)(lk.tensor(X))
    got = _run(lk, name, build, alias, clone=False)(lk.tensor(X))
    captured = lk.function(_run(lk, name, build, alias, clone=False))(lk.tensor(X))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    np.testing.assert_allclose(captured.numpy(), want.numpy(), rtol=1e-12)


def test_the_issues_three_snippets_give_pytorchs_gradients():
    def snippets(lib):
        grads = []
        for body in (lambda c: c.__iadd__(c), lambda c: c.__iadd__(c * 2), lambda c: c.add_(c)):
            x = lib.tensor(3.0, requires_grad=True)
            c = x * (x if len(grads) == 1 else 1)
            c = body(c)
            c.backward()
            grads.append(x.grad.item())
        return grads
    assert snippets(lk) == snippets(torch) == [2.0, 18.0, 2.0]


def test_captured_snippets_give_pytorchs_gradients():
    def f(x):
        c = x * x
        c += c * 2
        d = x * 1
        d.add_(d)
        return c + d
    g = lk.function(lk.grad(f))(lk.tensor(3.0, requires_grad=True))
    assert g.item() == 20.0          # 18 + 2


# ---- ops recorded before a write keep the gradient of the value they read --------------------
def _both(fn):
    out = []
    for lib in (lk, torch):
        x = lib.tensor([3.0, 4.0], requires_grad=True)
        fn(lib, x).sum().backward()
        out.append(x.grad.numpy())
    np.testing.assert_allclose(*out, rtol=1e-12)
    return out[0]


def test_an_op_that_read_a_tensor_before_a_write_keeps_its_gradient():
    def read_then_write(lib, x):
        c = x * 1
        d = c.exp()
        c.mul_(2)               # d read c before: its gradient is exp(x), not 2 exp(x)
        return d + c
    _both(read_then_write)


def test_a_write_into_a_tensor_read_earlier_does_not_reach_back():
    x = lk.tensor([3.0, 4.0], requires_grad=True)
    c = lk.zeros(2)
    d = c * 2                   # c had no history then: d has no gradient from x
    c.copy_(x)
    assert not d.requires_grad
    (d + c).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]


def test_a_view_read_after_its_base_was_written_sees_the_write():
    _both(lambda lib, x: (lambda c: (c[0:1], c.mul_(2))[0])(x * 1))
    _both(lambda lib, x: (lambda c: (c.view(2), c.mul_(2))[0])(x * 1))
    grads = []
    for lib in (lk, torch):               # the view itself as the root of backward
        x = lib.tensor([3.0, 4.0], requires_grad=True)
        c = x * 1
        v = c[0:1]
        c.mul_(x)
        v.backward(lib.ones(1))
        grads.append(x.grad.tolist())
    assert grads[0] == grads[1] == [6.0, 0.0]


def test_a_view_read_before_its_base_was_written_keeps_the_value_it_read():
    def f(lib, x):
        c = x * 1
        e = c[0:1] * 3
        c.mul_(2)
        return e
    _both(f)


def test_a_write_through_a_view_reaches_the_base():
    def through_row(lib, x):
        c = x * 1
        c[0:1].mul_(2)
        return c * c
    def through_reshape(lib, x):
        c = x * 1
        v = c.reshape(2)
        v.mul_(3)
        return c * c
    def through_a_view_of_a_view(lib, x):
        c = (x * 1).reshape(1, 2)
        c[0][1:].add_(x[0:1] * 5)
        return c.exp()
    for f in (through_row, through_reshape, through_a_view_of_a_view):
        _both(f)


def test_augmented_assignment_on_a_slice_has_pytorchs_gradient():
    def f(lib, x):
        c = x.reshape(1, 2) * 1
        c[:, 1] += c[:, 0] * 2
        c[:, 0] *= 3
        return c * c
    _both(f)
