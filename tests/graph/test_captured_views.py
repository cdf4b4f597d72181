"""Views and in-place writes under capture give eager mode's values and gradients.

Eagerly a view shares its base's memory; a captured graph has values, so capture models the
aliasing (labkit/graph/views.py). Each program below runs eagerly and in ``lk.function``: the
outputs and the gradients (float64, ``backward()`` inside the program) must agree, and the eager
gradient must agree with central finite differences. Views the capture cannot model raise a
GraphError naming the op and the line, never a different value.
"""
import numpy as np
import pytest

import labkit as lk
import labkit.nn as nn
import labkit.nn.functional as F
from labkit.errors import GraphError


def base_write_then_view_read(p):
    b = p * 1.0
    v = b[1]
    b.mul_(p)
    return v * 2.0


def view_write_then_base_read(p):
    b = p * 1.0
    v = b[:2]
    v.mul_(p[2:])
    return b


def chain_slice_of_transpose_of_reshape(p):
    b = p * 1.0
    r = b.reshape(6, 4)
    s = r.transpose(0, 1)[1:3]
    s.mul_(p[0, :6].exp())
    return b + r.sum() + s.sum()


def two_views_write_one_read_other(p):
    b = p * 1.0
    row, col = b[0], b[:, 1]
    row.add_(p[3] * 10.0)
    return col * 1.0


def copy_into_view(p):
    b = p * 1.0
    b[1:3].copy_(p[:2] * p[2:])
    return b


def setitem_into_transposed_view(p):
    b = p * 1.0
    t = b.t()
    t[0] = 7.0
    t[2, 1:] = p[0, :3] ** 2
    return b * p


def clamp_view(p):
    b = p * 1.0
    b[:, :3].clamp_(min=-0.2, max=0.3)
    return b * p


def relu_module_on_narrow_view(p):
    b = p * 1.0
    nn.ReLU(inplace=True)(b.narrow(1, 2, 3))
    return b * p


def select_unsqueeze_view(p):
    b = p * 1.0
    v = b.select(0, 2).unsqueeze(0)
    v.mul_(p[1:2])
    return b


def permute_of_reshape_both_ways(p):
    b = p * 1.0
    v = b.reshape(2, 2, 6).permute(2, 0, 1)
    v.add_(p.reshape(2, 2, 6).permute(2, 0, 1) ** 2)
    b.mul_(0.5)
    return v.sum(0) + b[0, :2]


def view_then_slice_of_it(p):
    b = p * 1.0
    flat = b.view(24)
    flat[3:7].mul_(p[0, :4])
    return b


def base_write_then_chain_read(p):
    b = p * 1.0
    r = b.reshape(6, 4).t()[1]
    b.mul_(p)
    return r * 1.0


def interleaved_writes_and_reads(p):
    b = p * 1.0
    v = b[0]
    before = v * 1.0
    v.add_(1.0)
    b.mul_(p)
    middle = v * 1.0
    v.mul_(p[1])
    return before + middle + b[0] + b[1]


def write_through_view_of_view_read_sibling(p):
    b = p * 1.0
    top = b[:2]
    cell = top[:, 3]
    other = b[:, 3]
    cell.mul_(p[3, :2])
    return other[:2] + top.sum(1)


# A view written through, then its memory written another way, then the view read: the view's
# value, and so its gradient, comes from its base as written last (as PyTorch rebuilds it).
def write_view_then_sibling_then_read(p):
    b = p * 1.0
    row, col = b[0], b[:, 1]
    row.mul_(p[1])
    col.add_(p[:, 2] ** 2)              # overlaps row at b[0, 1]
    return row * p[3] + col.sum()


def chain_written_then_base_then_both_read(p):
    b = p * 1.0
    t = b.t()
    row = t[2]
    row.mul_(p[0, :4].exp())
    b.mul_(p)
    return row * t.sum(0) + t[1]


def several_writes_through_a_chain(p):
    b = p * 1.0
    flat = b.view(24)
    seg = flat[4:12]
    seg.add_(p.reshape(24)[:8] ** 2)
    flat.mul_(p.reshape(24))
    seg.mul_(p[2, :2].sum())
    b[3] = p[0] * 2.0
    return seg + flat[:8] + b.sum(0).sum()


def written_view_read_by_a_write_into_its_base(p):
    b = p * 1.0
    v = b[1]
    v.mul_(p[0])
    b.mul_(p.tanh())
    # v is read as it is after b.mul_: labkit reads an operand aliasing the tensor written as
    # it was before the write (PyTorch refuses this partial overlap)
    b.add_(v)
    return b


def written_view_copied_out_after_base_write(p):
    b = p * 1.0
    v = b[:, 2:4]
    v.clamp_(min=-0.5)
    b.copy_(p * p)
    out = p[:, :2] * 0.0
    out.copy_(v * p[:, 4:])
    return out + v


def repeated_writes_through_a_transposed_view(p):
    b = p * 1.0
    v = b.t()[1:4]
    v.mul_(p.t()[:3])
    v.add_(p[0, :4] ** 2)
    s = b.sum()
    b.sub_(p * 0.5)
    v.mul_(p[2, :4])
    return v * s + b.t()[:3]


def writes_alternating_between_levels_of_a_chain(p):
    b = p * 1.0
    r = b.reshape(3, 8)
    v = r[1]
    v.mul_(p.reshape(24)[:8])
    r.mul_(p.reshape(3, 8))
    v.add_(p.reshape(24)[8:16])
    b.mul_(p)
    return v * r[2] + b[0].sum()


def setitem_into_a_view_then_its_base(p):
    b = p * 1.0
    v = b[1:3]
    v[:, 2] = p[0, :2] ** 2
    b[:, 1] = p[:, 5] * 3.0
    return v.sum() + v * p[2:]


# Writes of values that need a gradient through views of a buffer that needs none.
def copy_into_a_view_of_a_zeros_buffer(p):
    b = p.detach() * 0.0
    b[1:3].copy_(p[:2] * p[2:])
    v = b.t()[2:5]
    v.mul_(p[0, :4])
    return b + v.sum()


def write_through_a_chain_of_views_of_a_buffer_then_the_buffer(p):
    b = p.detach() * 0.0 + 1.0
    r = b.reshape(6, 4)
    s = r[1:3]
    s.add_(p[1:3, :4] ** 2)
    b.mul_(p)
    return (s * r[0]).sum() + b


def views_of_a_buffer_made_before_a_write_gives_it_a_gradient(p):
    b = p.detach() * 0.0 + 1.0
    below, col = b[1:], b[:, 4]
    b[:2].copy_(p[2:] ** 2)             # below and col overlap the rows written
    b.t()[5].mul_(p[0, :4])
    return below * p[1:] + col.sum()


PROGRAMS = [base_write_then_view_read, view_write_then_base_read,
            chain_slice_of_transpose_of_reshape, two_views_write_one_read_other, copy_into_view,
            setitem_into_transposed_view, clamp_view, relu_module_on_narrow_view,
            select_unsqueeze_view, permute_of_reshape_both_ways, view_then_slice_of_it,
            base_write_then_chain_read, interleaved_writes_and_reads,
            write_through_view_of_view_read_sibling, write_view_then_sibling_then_read,
            chain_written_then_base_then_both_read, several_writes_through_a_chain,
            written_view_read_by_a_write_into_its_base, written_view_copied_out_after_base_write,
            repeated_writes_through_a_transposed_view,
            writes_alternating_between_levels_of_a_chain, setitem_into_a_view_then_its_base,
            copy_into_a_view_of_a_zeros_buffer,
            write_through_a_chain_of_views_of_a_buffer_then_the_buffer,
            views_of_a_buffer_made_before_a_write_gives_it_a_gradient]

P0 = np.random.default_rng(0).standard_normal((4, 6))


def run(program, captured, p0=P0):
    """The program's output and the gradient of a loss of it, eagerly or captured."""
    p = lk.tensor(p0, dtype=lk.float64, requires_grad=True)
    c = lk.tensor(np.random.default_rng(1).standard_normal(program(lk.tensor(p0)).shape))

    def step(p):
        out = program(p)
        loss = (out * c).sum() + (out * out).sum()
        loss.backward()
        return out
    fn = lk.function(step) if captured else step
    out = fn(p).detach().numpy()
    return out, None if p.grad is None else p.grad.numpy()


def loss_value(program, p0):
    out = program(lk.tensor(p0, dtype=lk.float64)).numpy()
    c = np.random.default_rng(1).standard_normal(out.shape)
    return float((out * c).sum() + (out * out).sum())


def finite_differences(program, eps=1e-6):
    numeric = np.zeros_like(P0)
    for i in np.ndindex(P0.shape):
        up, down = P0.copy(), P0.copy()
        up[i] += eps
        down[i] -= eps
        numeric[i] = (loss_value(program, up) - loss_value(program, down)) / (2 * eps)
    return numeric


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_captured_equals_eager_in_value_and_gradient(program):
    eager_out, eager_grad = run(program, captured=False)
    out, grad = run(program, captured=True)
    np.testing.assert_allclose(out, eager_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grad, eager_grad, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_captured_gradient_matches_finite_differences(program):
    _, grad = run(program, captured=True)
    np.testing.assert_allclose(grad, finite_differences(program), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_eager_gradient_matches_finite_differences(program):
    _, grad = run(program, captured=False)
    np.testing.assert_allclose(grad, finite_differences(program), rtol=1e-5, atol=1e-6)


def test_the_examples_of_the_report():
    def f(x):
        b = x * 1
        v = b[0]
        b.add_(1)
        return v * 1

    def g(x):
        b = x * 1
        v = b[:2]
        v.mul_(5)
        return b.sum()
    x = lk.ones(3)
    assert float(lk.function(f)(x)) == float(f(x)) == 2.0
    assert float(lk.function(g)(x)) == float(g(x)) == 11.0


def test_real_of_complex_sees_a_write_into_the_complex_tensor():
    def f(x):
        z = x * (1 + 2j)
        re = z.real
        z.mul_(1j)
        return re * 1.0
    x = lk.tensor([1.0, -2.0, 3.0], dtype=lk.complex128)
    np.testing.assert_allclose(lk.function(f)(x).numpy(), f(x).numpy())
    np.testing.assert_allclose(f(x).numpy(), [-2.0, 4.0, -6.0])


def test_a_write_through_real_raises_naming_the_op_and_line():
    def f(x):
        z = x * 1.0
        z.real.mul_(2.0)
        return z
    x = lk.tensor([1.0 + 1j, 2.0], dtype=lk.complex128)
    np.testing.assert_allclose(f(x).numpy(), [2.0 + 1j, 4.0])       # eagerly fine
    with pytest.raises(GraphError, match=r"through a view made by real \(at .*test_captured_views.py:\d+\)"):
        lk.function(f)(x)


def test_a_stale_reshape_of_a_noncontiguous_view_raises_naming_the_op_and_line():
    def f(x):
        b = x * 1.0
        flat = b.t().reshape(6)          # eager numpy copies here; other reshapes view
        b.add_(1.0)
        return flat * 1.0
    x = lk.ones((2, 3), dtype=lk.float64)
    with pytest.raises(GraphError, match=r"reshape \(made at .*test_captured_views.py:\d+\)"):
        lk.function(f)(x)


def test_a_noncontiguous_reshape_nobody_writes_traces():
    def f(x):
        b = x * 1.0
        return b.t().reshape(6) * 2.0
    x = lk.tensor(np.arange(6.0).reshape(2, 3))
    np.testing.assert_allclose(lk.function(f)(x).numpy(), f(x).numpy())


def test_a_write_through_a_view_of_an_outside_tensor_raises():
    w = lk.zeros(3)

    def f(x):
        w[:2].add_(x)
        return w * 1.0
    with pytest.raises(GraphError, match=r"getitem \(at .*test_captured_views.py:\d+\): a view "
                                         r"of a tensor from outside"):
        lk.function(f)(lk.ones(1))


def _train(captured, steps=4):
    lk.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.Linear(8, 3)).to(lk.float64)
    opt = lk.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(2)
    batches = [(lk.tensor(rng.standard_normal((6, 5))), lk.tensor(rng.standard_normal((6, 3))))
               for _ in range(steps)]

    def step(x, y):
        opt.zero_grad()
        h = model[0](x)
        F.relu(h[:, 2:], inplace=True)          # an in-place op on a view of the activations
        h[:, :2].mul_(0.5)
        loss = ((model[1](h) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    fn = lk.function(step) if captured else step
    losses = [float(fn(x, y)) for x, y in batches]
    return losses, [p.detach().numpy().copy() for p in model.parameters()]


def test_captured_training_step_with_inplace_ops_on_views_equals_eager():
    eager_losses, eager_params = _train(False)
    losses, params = _train(True)
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-12)
    for a, b in zip(params, eager_params):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("captured", [False, True], ids=["eager", "captured"])
def test_a_write_through_detach_changes_values_not_history(captured):
    # as PyTorch: the detached tensor shares memory, the base keeps its own history
    def step(p):
        b = p * 1.0
        b.detach().mul_(3.0)
        c = p * 2.0
        c.detach()[1:].add_(p[:1].detach())
        out = b * p + c                # values 3p^2 + 2p + [0, p0, p0]; gradient 4p + 2
        out.sum().backward()
        return out

    p = lk.tensor([1.0, 2.0, 3.0], dtype=lk.float64, requires_grad=True)
    out = (lk.function(step) if captured else step)(p)
    np.testing.assert_allclose(out.detach().numpy(), [5.0, 17.0, 34.0])
    np.testing.assert_allclose(p.grad.numpy(), [6.0, 10.0, 14.0])


def _no_grad_write(p):
    b = p * 1.0
    with lk.no_grad():
        b.mul_(2.0)
    return b * p


def _no_grad_write_after_a_view_write(p):
    b = p * 1.0
    v = b[2]
    v.mul_(p[0])
    with lk.no_grad():
        b.mul_(2.0)
    return v * p + b


@pytest.mark.parametrize("program, values, grad", [
    (_no_grad_write, [2.0, 8.0, 18.0, 32.0], [3.0, 6.0, 9.0, 12.0]),
    (_no_grad_write_after_a_view_write, [8.0, 16.0, 24.0, 32.0], [40.0, 7.0, 17.0, 7.0]),
], ids=["plain", "through_a_view"])
@pytest.mark.parametrize("captured", [False, True], ids=["eager", "captured"])
def test_a_write_under_no_grad_changes_values_not_history(program, values, grad, captured):
    # the numbers are PyTorch's for the same program
    def step(p):
        out = program(p)
        out.sum().backward()
        return out

    p = lk.tensor([1.0, 2.0, 3.0, 4.0], dtype=lk.float64, requires_grad=True)
    out = (lk.function(step) if captured else step)(p)
    np.testing.assert_allclose(out.detach().numpy(), values)
    np.testing.assert_allclose(p.grad.numpy(), grad)
