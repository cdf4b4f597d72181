"""In-place writes and autodiff: a write into a value the backward pass needs raises, naming the
op and the value, as PyTorch does; writes that no gradient depends on are allowed."""
import numpy as np
import pytest

import labkit as lk


def test_writing_into_an_output_the_vjp_reads_is_an_error():
    x = lk.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()                                     # exp's gradient is g * exp(x) = g * y
    y.assign_add(1.0)
    with pytest.raises(lk.GradError, match=r"backward through exp: .* its output .* modified by "
                                           r"an in-place operation .* at version 1; exp saved "
                                           r"version 0\. .*t\.clone\(\)"):
        y.sum().backward()


def test_writing_into_a_saved_input_is_an_error():
    a = lk.tensor([1.0, 2.0], requires_grad=True)
    w = lk.nn.Parameter(lk.tensor([3.0, 4.0]))
    loss = (a * w).sum()
    opt = lk.optim.SGD([w], lr=0.1)
    w.grad = lk.ones(2)
    opt.step()                                      # an update before backward: w changed
    with pytest.raises(lk.GradError, match=r"backward through mul: .* its input 1, Tensor\(shape="
                                           r"\(2,\).* at version 1; mul saved version 0"):
        loss.backward()


def test_a_write_through_a_view_is_seen_by_the_viewed_tensor_and_back():
    base = lk.tensor([1.0, 2.0, 3.0, 4.0])
    view = base.reshape(2, 2)
    p = lk.tensor(np.ones((2, 2), np.float32), requires_grad=True)
    loss = (p * view).sum()
    base.assign(lk.zeros(4))                        # changes view's memory too
    with pytest.raises(lk.GradError, match="backward through mul: .* its input 1"):
        loss.backward()
    q = lk.tensor(np.ones(4, np.float32), requires_grad=True)
    loss = (q * base).sum()
    base.reshape(2, 2).assign(lk.ones(2, 2))        # a write through a view of a saved input
    with pytest.raises(lk.GradError, match="backward through mul"):
        loss.backward()


def test_writes_that_no_gradient_reads_are_allowed():
    x = lk.tensor([1.0, 2.0], requires_grad=True)
    y = x + 1.0                                     # add's gradient needs no values
    y.assign_add(5.0)
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]
    s = lk.tensor([1.0, 2.0], requires_grad=True)
    t = s * 2.0
    total = t.sum()                                 # sum's gradient needs only t's shape
    t.assign(lk.zeros(2))
    total.backward()
    assert s.grad.tolist() == [2.0, 2.0]


def test_writing_into_a_clone_leaves_the_gradient_right():
    x = lk.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    z = y.clone()
    z.assign_add(1.0)
    (y * 2.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp([1.0, 2.0]), rtol=1e-6)
    w = lk.tensor([1.0, 2.0], requires_grad=True)
    (w.clone() * 3.0).sum().backward()              # clone passes gradients through
    assert w.grad.tolist() == [3.0, 3.0]


def test_a_training_loop_with_updates_after_backward_runs_clean():
    lk.manual_seed(0)
    model = lk.nn.Sequential(lk.nn.Linear(4, 8), lk.nn.ReLU(), lk.nn.Linear(8, 2))
    opt = lk.optim.Adam(model.parameters(), lr=0.01)
    x, y = lk.randn(16, 4), lk.randint(0, 2, (16,))
    losses = []
    for _ in range(5):
        loss = lk.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_a_write_through_a_detached_alias_is_seen():
    x = lk.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    y.detach().assign_add(1.0)                      # the same memory as y
    with pytest.raises(lk.GradError, match="backward through exp: .* its output"):
        y.sum().backward()
