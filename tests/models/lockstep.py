"""Train one model source in PyTorch and in labkit, step for step, and compare.

A model file here is a function of the library namespace (``def make_gpt(torch): ...``), called
once with ``torch`` and once with ``labkit``: the same source, nothing changed but the import.
PyTorch initialises the weights (after ``torch.manual_seed``); labkit's models load PyTorch's
``state_dict``. Both train on the same batches in float32; labkit trains twice, eagerly and with
the whole training step (forward, backward, clipping, the optimiser's step) as one
``lk.function``, the scheduler stepping outside it as in a PyTorch loop.
"""
import numpy as np
import torch

import labkit as lk

LOSS_RTOL = 1e-4        # PyTorch against labkit, at every step
PARAM_TOL = 1e-4        # PyTorch against labkit, after the run
CAPTURED_TOL = 1e-6     # labkit captured against labkit eager (the plan fuses and reorders)


def load_torch_state(model, theirs):
    """Load PyTorch's ``state_dict`` (parameters and buffers) into labkit's ``model``."""
    model.load_state_dict({k: lk.tensor(v.detach().numpy().copy())
                           for k, v in theirs.state_dict().items()})
    return model


def train(lib, model, optimize, loss_of, batches, clip=None, capture=False, device=None):
    """Train ``model`` on ``batches`` (tuples of NumPy arrays and Python values); the loss of
    every step (a NumPy array) and the step function (an ``lk.function`` when captured).

    ``optimize(lib, model)`` gives (optimizer, scheduler or None); ``loss_of(lib, model,
    *batch)`` the loss of a batch; ``clip`` a maximum gradient norm."""
    optimizer, scheduler = optimize(lib, model)

    def step(*batch):
        optimizer.zero_grad()
        loss = loss_of(lib, model, *batch)
        loss.backward()
        if clip is not None:
            lib.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        return loss

    def as_tensor(value):
        if not isinstance(value, np.ndarray):
            return value
        t = lib.tensor(value)
        return t if device is None else t.to(device)
    run = lk.function(step) if capture else step
    losses = []
    for batch in batches:
        losses.append(run(*map(as_tensor, batch)).item())
        if scheduler is not None:
            scheduler.step()
    return np.array(losses), run


def assert_state_close(ours, theirs, rtol, atol, what):
    """Every entry of labkit's ``state_dict`` close to PyTorch's (same keys)."""
    mine, their = ours.state_dict(), theirs.state_dict()
    assert sorted(mine) == sorted(their), what
    for key, value in their.items():
        np.testing.assert_allclose(mine[key].numpy(), value.detach().numpy(), rtol=rtol,
                                   atol=atol, err_msg=f"{what}: {key}")


def lockstep(make_model, optimize, loss_of, batches, clip=None, device=None):
    """Train the model ``make_model(lib)`` in PyTorch, labkit eager and labkit captured on
    ``batches``; check every step's loss and the trained parameters and buffers against
    PyTorch's, and captured against eager. The three trained models (torch, eager, captured)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)      # small models: more threads only wait on one another
    try:
        return _lockstep(make_model, optimize, loss_of, batches, clip, device)
    finally:
        torch.set_num_threads(threads)


def _lockstep(make_model, optimize, loss_of, batches, clip, device):
    torch.manual_seed(0)
    theirs = make_model(torch)
    eager = load_torch_state(make_model(lk), theirs)
    captured = load_torch_state(make_model(lk), theirs)
    if device is not None:
        eager.to(device)
        captured.to(device)
    expected, _ = train(torch, theirs, optimize, loss_of, batches, clip)
    got, _ = train(lk, eager, optimize, loss_of, batches, clip, device=device)
    got_captured, run = train(lk, captured, optimize, loss_of, batches, clip, capture=True,
                              device=device)
    assert len(run.traces) == 1, run.traces
    steps = np.arange(1, len(batches) + 1)
    for name, losses in (("eager", got), ("captured", got_captured)):
        bad = ~np.isclose(losses, expected, rtol=LOSS_RTOL, atol=0)
        assert not bad.any(), (f"{name} losses differ from PyTorch's at steps {steps[bad]}:\n"
                               f"labkit  {losses[bad]}\nPyTorch {expected[bad]}")
    assert expected[-5:].mean() < 0.9 * expected[:5].mean(), f"not learning: {expected}"
    np.testing.assert_allclose(got_captured, got, rtol=CAPTURED_TOL, atol=0)
    for name, model in (("eager", eager), ("captured", captured)):
        assert_state_close(model, theirs, PARAM_TOL, PARAM_TOL, f"{name} after training")
    assert_state_close(captured, eager, CAPTURED_TOL, CAPTURED_TOL, "captured against eager")
    return theirs, eager, captured
