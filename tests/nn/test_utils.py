"""``lk.nn.utils`` against ``torch.nn.utils``: gradient clipping by norm (every norm type, the
total norm returned, error_if_nonfinite, parameters without gradients, a single tensor, a
generator) and by value, parameters_to_vector / vector_to_parameters; and the same inside a
captured training step (backward inside it, or run eagerly before it), equal to eager, with
one trace."""
import math

import numpy as np
import pytest
import torch

import labkit as lk

RNG = np.random.default_rng(0)
ARRAYS = [RNG.standard_normal((4, 3)), RNG.standard_normal(3), RNG.standard_normal((2, 2))]


def _with_grads(lib, arrays=ARRAYS, skip=()):
    params = [lib.nn.Parameter(lib.tensor(a.copy())) for a in arrays]
    loss = (params[0] @ params[1].reshape(3, 1)).sum() ** 2 + (params[2] ** 3).sum()
    if 0 in skip:
        loss = (params[2] ** 3).sum()
    loss.backward()
    return params


def _grads(params):
    return [None if p.grad is None else p.grad.detach().numpy().copy() for p in params]


@pytest.mark.parametrize("norm_type", [2.0, 1, math.inf, 3.5, 0.5, "inf"])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])
def test_clip_grad_norm_matches_pytorch(norm_type, max_norm):
    out = []
    for lib in (torch, lk):
        params = _with_grads(lib)
        total = lib.nn.utils.clip_grad_norm_(params, max_norm, norm_type=norm_type,
                                             foreach=None)
        out.append((float(total), _grads(params)))
    (t_total, t_grads), (l_total, l_grads) = out
    assert l_total == pytest.approx(t_total, rel=1e-13)
    for a, b in zip(l_grads, t_grads):
        np.testing.assert_allclose(a, b, rtol=1e-13)


def test_clip_grad_norm_forms():
    for lib in (torch, lk):                    # a single tensor; a generator; no gradients
        p = lib.nn.Parameter(lib.tensor([3.0, 4.0]))
        (p * p).sum().backward()
        assert float(lib.nn.utils.clip_grad_norm_(p, 1.0)) == pytest.approx(10.0)
        assert float(lib.nn.utils.clip_grad_norm(iter([p]), 1.0)) == pytest.approx(1.0, 1e-5)
        q = lib.nn.Parameter(lib.zeros(2))
        assert float(lib.nn.utils.clip_grad_norm_([q], 1.0)) == 0.0 and q.grad is None
    params = [lk.nn.Parameter(lk.tensor(a)) for a in ARRAYS]
    (params[2] ** 2).sum().backward()          # only some parameters have gradients
    total = lk.nn.utils.clip_grad_norm_(params, 0.1)
    assert params[0].grad is None and total.item() == pytest.approx(
        2 * np.linalg.norm(ARRAYS[2]))
    norm = lk.nn.utils.get_total_norm([lk.tensor([3.0]), lk.tensor([4.0])], norm_type=1)
    assert norm.item() == 7.0


def test_error_if_nonfinite():
    for lib in (torch, lk):
        p = lib.nn.Parameter(lib.tensor([1.0, math.inf]))
        (p * p).sum().backward()
        with pytest.raises(RuntimeError, match="non-finite"):
            lib.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
        total = lib.nn.utils.clip_grad_norm_([p], 1.0)          # scaled by inf anyway
        assert math.isinf(float(total))
    p = lk.nn.Parameter(lk.tensor([1.0, 2.0]))

    @lk.function
    def step(x):
        (p * p * x).sum().backward()
        total = lk.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
        p.grad = None
        return total
    assert step(lk.tensor(1.0)).item() == pytest.approx(2 * math.sqrt(5))
    with pytest.raises(lk.GradError, match="non-finite.*error_if_nonfinite=False"):
        step(lk.tensor(math.inf))                  # checked when the captured step runs
    assert len(step.traces) == 1


@pytest.mark.parametrize("clip_value", [0.5, 3])
def test_clip_grad_value_matches_pytorch(clip_value):
    # the same gradients in both (computed once, by PyTorch: the two libraries' BLAS may round
    # the products behind them differently), then clipped by each
    theirs = _with_grads(torch)
    ours = [lk.nn.Parameter(lk.tensor(p.detach().numpy().copy())) for p in theirs]
    for p, t in zip(ours, theirs):
        p.grad = lk.tensor(t.grad.numpy().copy())
    torch.nn.utils.clip_grad_value_(theirs, clip_value)
    lk.nn.utils.clip_grad_value_(ours, clip_value)
    for a, b in zip(_grads(ours), _grads(theirs)):
        np.testing.assert_array_equal(a, b)


def test_parameters_to_vector_and_back():
    out = []
    for lib in (torch, lk):
        params = [lib.nn.Parameter(lib.tensor(a.copy())) for a in ARRAYS]
        vec = lib.nn.utils.parameters_to_vector(params)
        (vec * lib.arange(vec.shape[0], dtype=vec.dtype)).sum().backward()
        lib.nn.utils.vector_to_parameters(vec * 2, params)
        out.append((vec.detach().numpy(), _grads(params),
                    [p.detach().numpy().copy() for p in params]))
    (tv, tg, tp), (lv, lg, lp) = out
    np.testing.assert_array_equal(lv, tv)
    for a, b in zip(lg + lp, tg + tp):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(TypeError, match="expects a tensor"):
        lk.nn.utils.vector_to_parameters(np.zeros(3), [lk.nn.Parameter(lk.zeros(3))])
    with pytest.raises(lk.ShapeError, match="vector of 3 elements"):
        lk.nn.utils.vector_to_parameters(lk.zeros(4), [lk.nn.Parameter(lk.zeros(3))])


# ---- inside a captured training step --------------------------------------------------------
def _train(capture, clip, backward_inside=True, steps=8):
    rng = np.random.default_rng(1)
    x, y = lk.tensor(rng.standard_normal((16, 5))), lk.tensor(rng.integers(0, 3, 16))
    lk.manual_seed(0)
    model = lk.nn.Sequential(lk.nn.Linear(5, 8), lk.nn.Tanh(), lk.nn.Linear(8, 3)).double()
    opt = lk.optim.SGD(model.parameters(), lr=0.5)

    def loss_of(x, y):
        return lk.nn.functional.cross_entropy(model(x), y)

    def update():
        total = clip(model.parameters())
        opt.step()
        return total

    def step(x, y):
        opt.zero_grad()
        loss = loss_of(x, y)
        loss.backward()
        return loss, update()
    if backward_inside:
        run = lk.function(step) if capture else step
    else:
        captured = lk.function(update) if capture else update

        def run(x, y):
            opt.zero_grad()
            loss = loss_of(x, y)
            loss.backward()
            return loss, captured()
    out = []
    for _ in range(steps):
        loss, total = run(x, y)
        out.append((loss.item(), np.nan if total is None else total.item()))
    return np.array(out), [p.detach().numpy() for p in model.parameters()], \
        (run if backward_inside else captured)


CLIPS = {"norm": lambda ps: lk.nn.utils.clip_grad_norm_(ps, 0.3),
         "norm_inf": lambda ps: lk.nn.utils.clip_grad_norm_(ps, 0.05, norm_type="inf",
                                                            error_if_nonfinite=True),
         "value": lambda ps: lk.nn.utils.clip_grad_value_(ps, 0.02)}


@pytest.mark.parametrize("backward_inside", [True, False], ids=["backward_inside",
                                                                "backward_eager"])
@pytest.mark.parametrize("clip", list(CLIPS))
def test_captured_clipping_equals_eager(clip, backward_inside):
    eager, p_eager, _ = _train(False, CLIPS[clip], backward_inside)
    captured, p_captured, run = _train(True, CLIPS[clip], backward_inside)
    np.testing.assert_allclose(captured, eager, rtol=1e-12)
    for a, b in zip(p_captured, p_eager):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    assert len(run.traces) == 1
    unclipped, _, _ = _train(False, lambda ps: None, backward_inside)
    assert not np.allclose(eager[-1, 0], unclipped[-1, 0])      # the clipping mattered
