"""lk.inference_mode: PyTorch's torch.inference_mode (context manager and decorator forms,
nesting, mode=False), inference tensors and the errors for using them in autodiff later."""
import threading

import numpy as np
import pytest
import torch

import labkit as lk


def t(values, device, **kw):
    return lk.tensor(values, device=device, **kw)


# ---- the modes, as PyTorch switches them ----------------------------------------------------
def _states(lib):
    """(grad enabled, inference mode enabled) at each point of one nesting of contexts."""
    seen = [(lib.is_grad_enabled(), lib.is_inference_mode_enabled())]
    with lib.inference_mode():
        seen.append((lib.is_grad_enabled(), lib.is_inference_mode_enabled()))
        with lib.inference_mode():
            seen.append((lib.is_grad_enabled(), lib.is_inference_mode_enabled()))
            with lib.inference_mode(False):
                seen.append((lib.is_grad_enabled(), lib.is_inference_mode_enabled()))
                with lib.no_grad():
                    seen.append((lib.is_grad_enabled(), lib.is_inference_mode_enabled()))
            seen.append((lib.is_grad_enabled(), lib.is_inference_mode_enabled()))
        seen.append((lib.is_grad_enabled(), lib.is_inference_mode_enabled()))
    with lib.no_grad():
        with lib.inference_mode(mode=False):      # turns grad mode on, as PyTorch's does
            seen.append((lib.is_grad_enabled(), lib.is_inference_mode_enabled()))
        seen.append((lib.is_grad_enabled(), lib.is_inference_mode_enabled()))
    seen.append((lib.is_grad_enabled(), lib.is_inference_mode_enabled()))
    return seen


def test_nesting_and_mode_false_switch_the_modes_as_pytorch():
    assert _states(lk) == _states(torch)


def test_nothing_is_recorded_and_tensors_made_inside_are_inference_tensors(device):
    w = t([1.0, 2.0], device, requires_grad=True)
    with lk.inference_mode():
        y = w * 3.0
        made = lk.ones(2, device=device)
        data = lk.tensor([1.0, 2.0], device=device)
    assert not y.requires_grad and y.is_leaf
    assert y.is_inference() and made.is_inference() and data.is_inference()
    assert not w.is_inference() and not (w * 3.0).is_inference()
    np.testing.assert_array_equal(y.numpy(), [3.0, 6.0])
    with lk.no_grad():
        assert not (w * 3.0).is_inference()       # no_grad makes normal tensors
    with lk.inference_mode():
        with lk.inference_mode(False):
            assert not lk.ones(2, device=device).is_inference()
            assert (w * 2.0).requires_grad


def test_decorator_forms():
    w = lk.ones(2, requires_grad=True)

    @lk.inference_mode
    def bare(x):
        return x * 2, lk.is_inference_mode_enabled()

    @lk.inference_mode()
    def called(x):
        return x * 2, lk.is_inference_mode_enabled()

    @lk.inference_mode(False)
    def off(x):
        return x * 2, lk.is_inference_mode_enabled()

    for fn, on in ((bare, True), (called, True)):
        y, inside = fn(w)
        assert inside is on and y.is_inference() and not y.requires_grad
        assert bare.__name__ == "bare"
    with lk.inference_mode():
        y, inside = off(w)
    assert inside is False and y.requires_grad and not y.is_inference()
    assert not lk.is_inference_mode_enabled() and lk.is_grad_enabled()


def test_decorated_function_is_reentrant_and_restores_after_errors():
    @lk.inference_mode()
    def recurse(x, n):
        assert lk.is_inference_mode_enabled() and not lk.is_grad_enabled()
        return x if n == 0 else recurse(x * 1.0, n - 1)

    assert recurse(lk.ones(1, requires_grad=True), 3).is_inference()
    ctx = lk.inference_mode()
    with ctx:
        with ctx:                          # one instance entered twice
            pass
        assert lk.is_inference_mode_enabled()
    with pytest.raises(ZeroDivisionError):
        with lk.inference_mode():
            1 / 0
    assert not lk.is_inference_mode_enabled() and lk.is_grad_enabled()
    assert not (lk.ones(1) * 2).is_inference()


def test_mode_is_per_thread():
    seen = []
    entered, done = threading.Event(), threading.Event()

    def other():
        entered.wait()
        seen.append((lk.is_inference_mode_enabled(), (lk.ones(1) * 2).is_inference()))
        done.set()

    th = threading.Thread(target=other)
    th.start()
    with lk.inference_mode():
        entered.set()
        done.wait()
    th.join()
    assert seen == [(False, False)]


def test_a_mode_that_is_not_a_bool_is_a_clear_error():
    with pytest.raises(TypeError, match="True or False"):
        lk.inference_mode("yes")


# ---- inference tensors outside inference mode ------------------------------------------------
def test_inference_tensor_in_a_recorded_op_is_refused_with_the_fix(device):
    w = t([1.0, 2.0], device, requires_grad=True)
    with lk.inference_mode():
        x = t([3.0, 4.0], device) * 1.0
    with pytest.raises(lk.GradError, match=r"mul: input 1 .*inference tensor.*cannot be saved for "
                                           r"backward.*clone\(\)"):
        w * x
    (w * x.clone()).sum().backward()                 # the clone is a normal tensor
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 4.0])
    assert not x.clone().is_inference()
    with lk.no_grad():
        assert (w * x).tolist() == [3.0, 8.0]       # nothing recorded: allowed
    assert (x * 2.0).tolist() == [6.0, 8.0]          # nothing requires grad: allowed


def test_requires_grad_and_in_place_writes_on_inference_tensors_are_refused(device):
    with lk.inference_mode():
        x = lk.ones(2, device=device)
        x.add_(1.0)                                 # inside inference mode: allowed
        x[0] = 5.0
    assert x.tolist() == [5.0, 2.0]
    with pytest.raises(lk.GradError, match="requires_grad=True on an inference tensor.*clone"):
        x.requires_grad_()
    with pytest.raises(lk.GradError, match=r"add_: .*inference tensor.*in place.*clone\(\)"):
        x.add_(1.0)
    with pytest.raises(lk.GradError, match="inference tensor"):
        x[0] = 1.0
    assert x.tolist() == [5.0, 2.0]
    assert x.detach().is_inference()
    y = x.clone()
    y.add_(1.0)
    assert y.requires_grad_().requires_grad


def test_pytorch_refuses_the_same_uses():
    w = torch.ones(2, requires_grad=True)
    with torch.inference_mode():
        x = torch.ones(2) * 1.0
    for use in (lambda: w * x, lambda: x.requires_grad_(), lambda: x.add_(1.0)):
        with pytest.raises(RuntimeError, match="nference"):
            use()


# ---- with the rest of labkit ---------------------------------------------------------------
def test_a_model_under_inference_mode_gives_no_grads_values(device):
    net = lk.nn.Sequential(lk.nn.Linear(4, 8), lk.nn.ReLU(), lk.nn.Linear(8, 3)).to(device)
    x = lk.randn(5, 4, device=device)
    with lk.no_grad():
        expected = net(x).numpy()
    with lk.inference_mode():
        got = net(x)
    assert got.is_inference() and not got.requires_grad
    np.testing.assert_array_equal(got.numpy(), expected)
    net(x).sum().backward()                          # training afterwards is untouched
    assert net[0].weight.grad is not None


def test_grad_and_enable_grad_still_record_inside(device):
    with lk.inference_mode():
        g = lk.grad(lambda x: (x * x).sum())(t([1.0, 2.0], device))
        w = t([1.0], device, requires_grad=True)
        with lk.enable_grad():
            y = w * 2.0
    assert g.tolist() == [2.0, 4.0]
    assert y.requires_grad and not y.is_inference()


def test_captured_function_and_vmap_under_inference_mode(device):
    w = t([[1.0, 2.0], [3.0, 4.0]], device, requires_grad=True)

    @lk.function
    def f(x):
        return (x @ w).sum(dim=1)

    x = t([[1.0, 1.0], [0.5, 2.0]], device)
    with lk.inference_mode():
        inside = f(x)
        batched = lk.vmap(lambda row: (row @ w).sum())(x)
    assert not inside.requires_grad and not batched.requires_grad
    np.testing.assert_allclose(inside.numpy(), f(x).numpy())
    np.testing.assert_allclose(batched.numpy(), inside.numpy())


def test_debug_mode_checks_ops_inside_inference_mode():
    lk.config.set_debug(True)
    try:
        with lk.inference_mode():
            y = lk.ones(2) * 2.0
            with pytest.raises(lk.NumericsError), np.errstate(invalid="ignore"):
                lk.log(lk.tensor([-1.0]))
    finally:
        lk.config.set_debug(False)
    assert y.is_inference()


def test_profile_inside_inference_mode_times_its_ops():
    with lk.inference_mode():
        with lk.profile() as prof:
            y = lk.ones(2) + 1.0
    assert y.is_inference()
    assert "add" in {e.name for e in prof.events}
