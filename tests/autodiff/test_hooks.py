"""Gradient hooks: post-accumulate hooks run after backward fills .grad, in registration order,
once per pass; callbacks queued from a hook run when the pass has handed out every gradient."""
import gc

import numpy as np
import pytest

import labkit as lk
from labkit.autodiff import hooks


def test_a_hook_sees_the_accumulated_gradient_after_each_backward():
    w = lk.tensor([1.0, 2.0], dtype="float64", requires_grad=True)
    seen = []
    w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    (w * w).sum().backward()
    (w * 3.0).sum().backward()                      # accumulates: 2w + 3
    assert seen == [[2.0, 4.0], [5.0, 7.0]]


def test_hooks_run_in_registration_order_and_can_be_removed():
    w = lk.tensor([1.0], requires_grad=True)
    calls = []
    first = w.register_post_accumulate_grad_hook(lambda t: calls.append("first"))
    w.register_post_accumulate_grad_hook(lambda t: calls.append("second"))
    w.sum().backward()
    first.remove()
    first.remove()                                  # removing twice is harmless
    w.sum().backward()
    assert calls == ["first", "second", "second"]


def test_a_queued_callback_runs_once_every_gradient_is_in_place():
    a = lk.tensor([1.0], requires_grad=True)
    b = lk.tensor([2.0], requires_grad=True)
    at_end, queued = [], []

    def hook(t):
        if not queued:                  # the first hook of the pass queues the callback
            queued.append(hooks.current_pass())
            hooks.queue_callback(lambda: at_end.append((a.grad.item(), b.grad.item())))
    a.register_post_accumulate_grad_hook(hook)
    b.register_post_accumulate_grad_hook(hook)
    (a * b).sum().backward()
    assert at_end == [(2.0, 1.0)]


def test_a_hook_runs_as_soon_as_its_gradient_is_complete_during_the_pass():
    w1 = lk.tensor(np.ones((3, 3)), requires_grad=True)
    w2 = lk.tensor(np.full((3, 3), 2.0), requires_grad=True)
    order = []

    @lk.custom_vjp
    def noted(x):                       # an identity whose backward says when it runs
        return x * 1.0
    noted.defvjp(lambda x: (x * 1.0, None), lambda res, g: (order.append("middle") or g,))
    w1.register_post_accumulate_grad_hook(lambda t: order.append("w1"))
    w2.register_post_accumulate_grad_hook(lambda t: order.append("w2"))
    (noted(lk.ones(2, 3) @ w1) @ w2).sum().backward()
    # w2 is read last in the forward: its gradient is complete, and its hook runs, before
    # the backward pass reaches the ops before it
    assert order == ["w2", "middle", "w1"]
    np.testing.assert_allclose(w1.grad.numpy(), np.full((3, 3), 12.0))
    np.testing.assert_allclose(w2.grad.numpy(), np.full((3, 3), 6.0))


def test_functional_gradients_and_no_backward_run_no_hooks():
    w = lk.tensor([1.0, 2.0], requires_grad=True)
    calls = []
    w.register_post_accumulate_grad_hook(lambda t: calls.append(1))
    lk.grad(lambda x: (x * x).sum())(w)             # returns gradients, fills no .grad
    assert calls == [] and w.grad is None


def test_hooks_on_non_leaves_and_bad_hooks_are_errors():
    w = lk.tensor([1.0], requires_grad=True)
    with pytest.raises(lk.GradError, match="only a leaf tensor that requires grad"):
        (w * 2.0).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(lk.GradError, match="only a leaf tensor that requires grad"):
        lk.ones(2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(TypeError, match="hook must be callable"):
        w.register_post_accumulate_grad_hook("not a function")
    with pytest.raises(lk.GradError, match="no backward pass is running"):
        hooks.queue_callback(lambda: None)


def test_an_error_in_backward_drops_the_queued_callbacks():
    w = lk.tensor([1.0], requires_grad=True)
    ran = []

    def hook(t):
        hooks.queue_callback(lambda: ran.append(1))
        raise RuntimeError("hook failed")
    w.register_post_accumulate_grad_hook(hook)
    with pytest.raises(RuntimeError, match="hook failed"):
        w.sum().backward()
    assert ran == [] and hooks.current_pass() is None


def test_a_collected_tensor_takes_its_hooks_with_it():
    w = lk.tensor(np.ones(3), requires_grad=True)
    w.register_post_accumulate_grad_hook(lambda t: None)
    key = id(w)
    assert key in hooks._hooks
    del w
    gc.collect()
    assert key not in hooks._hooks


def test_data_parallel_in_one_process_keeps_plain_training():
    lk.manual_seed(0)
    dp = lk.dist.DataParallel(lk.nn.Linear(3, 1))
    opt = lk.optim.SGD(dp.parameters(), lr=0.1)
    x, y = lk.ones(4, 3), lk.zeros(4, 1)
    loss = lk.nn.functional.mse_loss(dp(x), y)
    loss.backward()
    assert dp._syncs == 1                           # the hooks averaged (a no-op for one rank)
    dp.backward(lk.nn.functional.mse_loss(dp(x), y))
    assert dp._syncs == 2                           # once per pass, not once per parameter
    opt.step()
