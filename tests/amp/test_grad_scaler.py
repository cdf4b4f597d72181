"""lk.amp.GradScaler against torch.amp.GradScaler: the same scale sequence, the same skipped steps
and the same parameters over a float16-autocast run with overflowing batches; its errors,
state_dict and the disabled / no-GPU forms."""
import numpy as np
import pytest

import labkit as lk

torch = pytest.importorskip("torch")

# batches 2 and 5 hold an inf: their gradients are NaN/inf, so those steps are skipped
BAD = {2, 5}


def _batches(n=9):
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        x = rng.standard_normal((8, 4)).astype(np.float32)
        if i in BAD:
            x[0, 0] = np.inf
        out.append((x, rng.standard_normal((8, 2)).astype(np.float32)))
    return out


def _run(fw, w0, b0, batches, **kw):
    """The training run, written once: ``fw`` is labkit or torch (one spelling for both)."""
    lin = fw.nn.Linear(4, 2)
    with fw.no_grad():
        lin.weight.copy_(fw.tensor(w0))
        lin.bias.copy_(fw.tensor(b0))
    opt = fw.optim.SGD(lin.parameters(), lr=0.05, momentum=0.9)
    scaler = fw.amp.GradScaler("cpu", **kw)
    scales, weights = [], []
    for x, y in batches:
        opt.zero_grad()
        with fw.autocast("cpu", dtype=fw.float16):
            loss = fw.nn.functional.mse_loss(lin(fw.tensor(x)), fw.tensor(y))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        weights.append(lin.weight.detach().numpy().copy())
    return scales, weights, scaler


def test_same_scales_skips_and_parameters_as_pytorch():
    rng = np.random.default_rng(1)
    w0, b0 = rng.standard_normal((2, 4)).astype(np.float32), np.zeros(2, np.float32)
    kw = dict(init_scale=2.0 ** 10, growth_factor=2.0, backoff_factor=0.5, growth_interval=2)
    mine, my_w, scaler = _run(lk, w0, b0, _batches(), **kw)
    theirs, their_w, tscaler = _run(torch, w0, b0, _batches(), **kw)
    assert mine == theirs
    assert mine[2] == mine[1] * 0.5 and mine[5] == mine[4] * 0.5      # backed off on inf
    for i in BAD:                                                    # skipped: unchanged
        np.testing.assert_array_equal(my_w[i], my_w[i - 1])
    np.testing.assert_allclose(np.array(my_w), np.array(their_w), rtol=2e-3, atol=2e-3)
    assert scaler.state_dict() == tscaler.state_dict()


def test_unscale_before_clipping_and_the_order_errors():
    lin = lk.nn.Linear(2, 1)
    opt = lk.optim.SGD(lin.parameters(), lr=0.1)
    scaler = lk.amp.GradScaler("cpu", init_scale=8.0)
    with pytest.raises(RuntimeError, match="scale"):
        scaler.step(opt)                          # nothing scaled yet
    scaler.scale(lin(lk.ones(1, 2)).sum()).backward()
    assert lin.bias.grad.item() == 8.0
    scaler.unscale_(opt)
    assert lin.bias.grad.item() == 1.0            # true gradients, ready to clip
    lk.nn.utils.clip_grad_norm_(lin.parameters(), 1.0)
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)                              # does not unscale twice
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 8.0


def test_state_dict_round_trip_and_explicit_new_scale():
    scaler = lk.amp.GradScaler("cpu", init_scale=4.0, growth_interval=7)
    scaler.scale(lk.ones(()))
    scaler.update(new_scale=32.0)
    state = scaler.state_dict()
    assert state == {"scale": 32.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                     "growth_interval": 7, "_growth_tracker": 0}
    other = lk.amp.GradScaler("cpu")
    other.load_state_dict(state)
    assert other.get_scale() == 32.0 and other.get_growth_interval() == 7
    assert (other.scale(lk.ones(())) == 32.0).item()
    with pytest.raises(RuntimeError, match="empty"):
        other.load_state_dict({})
    assert lk.amp.GradScaler("cpu", enabled=False).state_dict() == {}


def test_disabled_passes_through_and_cuda_without_gpu_disables_itself():
    lin = lk.nn.Linear(2, 1)
    opt = lk.optim.SGD(lin.parameters(), lr=0.1)
    loss = lin(lk.ones(1, 2)).sum()
    off = lk.amp.GradScaler("cpu", enabled=False)
    assert off.scale(loss) is loss and off.get_scale() == 1.0 and not off.is_enabled()
    if lk.cuda.is_available():
        return
    with pytest.warns(UserWarning, match="no GPU"):
        scaler = lk.cuda.amp.GradScaler()           # as torch.cuda.amp.GradScaler() on a CPU
    assert not scaler.is_enabled()
    loss.backward()
    scaler.step(opt)                                  # plain optimizer.step()
    scaler.update()


def test_float16_gradients_are_refused_by_unscale():
    p = lk.nn.Parameter(lk.ones(2, dtype=lk.float16))
    opt = lk.optim.SGD([p], lr=0.1)
    scaler = lk.amp.GradScaler("cpu")
    scaler.scale((p * p).sum()).backward()
    with pytest.raises(ValueError, match="FP16 gradients"):
        scaler.step(opt)


def test_scale_inside_a_captured_step_reads_the_current_scale():
    lin = lk.nn.Linear(2, 1)
    scaler = lk.amp.GradScaler("cpu", init_scale=2.0)
    scaled = lk.function(lambda x: scaler.scale(lin(x).sum()))
    x = lk.ones(1, 2)
    first = scaled(x).item()
    scaler.update(new_scale=8.0)
    assert scaled(x).item() == pytest.approx(first * 4) and len(scaled.traces) == 1
