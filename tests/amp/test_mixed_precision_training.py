"""Mixed-precision training against PyTorch's CPU autocast, one source for both libraries:

- the GPT of tests/models/test_gpt.py under bfloat16 autocast (AdamW, warm-up and cosine,
  clipping), eagerly and with the training step captured by lk.function;
- a CNN on the digits under float16 autocast with a GradScaler (Adam, the
  gradients unscaled before clipping), whose first steps overflow and are skipped.

Half precision rounds differently in every library (and eager against captured), so the losses
are compared to a tolerance, not step for step to float32's: they track PyTorch's within a few
percent, and the mixed-precision run stays close to the float32 one."""
import numpy as np
import pytest

import labkit as lk

from tests.models import test_gpt as gpt
from tests.models.lockstep import load_torch_state

torch = pytest.importorskip("torch")


def _train(fw, model, optimizer, scheduler, batches, loss_of, dtype, scaler=None,
           clip=None, capture=False):
    """Losses of training ``model`` on ``batches`` under ``fw.autocast('cpu', dtype)`` (no
    autocast for dtype None), with ``scaler`` (a GradScaler) if given."""
    def forward_backward(*batch):
        optimizer.zero_grad()
        if dtype is None:
            loss = loss_of(fw, model, *batch)
        else:
            with fw.autocast("cpu", dtype=getattr(fw, dtype)):
                loss = loss_of(fw, model, *batch)
        (scaler.scale(loss) if scaler is not None else loss).backward()
        return loss

    def step(*batch):
        loss = forward_backward(*batch)
        if clip is not None:
            fw.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        return loss

    run = lk.function(step) if capture else step
    losses, scales = [], []
    for batch in batches:
        tensors = [fw.tensor(b) for b in batch]
        if scaler is None:
            losses.append(run(*tensors).item())
        else:          # unscale, clip, step and update decide from values: eagerly
            losses.append(forward_backward(*tensors).item())
            scaler.unscale_(optimizer)
            fw.nn.utils.clip_grad_norm_(model.parameters(), clip)
            scaler.step(optimizer)
            scaler.update()
            scales.append(scaler.get_scale())
        if scheduler is not None:
            scheduler.step()
    return np.array(losses), scales, run


def _gpt_run(fw, theirs, dtype, capture=False):
    model = theirs if fw is torch else load_torch_state(gpt.make_gpt(lk, "sdpa"), theirs)
    optimizer, scheduler = gpt.lambda_schedule(fw, model)
    losses, _, run = _train(fw, model, optimizer, scheduler, gpt.batches(), gpt.loss_of, dtype,
                            clip=gpt.CLIP, capture=capture)
    return losses, run


def test_bfloat16_autocast_gpt_tracks_pytorch():
    torch.manual_seed(0)
    start = gpt.make_gpt(torch, "sdpa")
    state = {k: v.clone() for k, v in start.state_dict().items()}

    def fresh():
        model = gpt.make_gpt(torch, "sdpa")
        model.load_state_dict(state)
        return model

    theirs, _ = _gpt_run(torch, fresh(), "bfloat16")
    theirs_f32, _ = _gpt_run(torch, fresh(), None)
    eager, _ = _gpt_run(lk, fresh(), "bfloat16")
    captured, run = _gpt_run(lk, fresh(), "bfloat16", capture=True)
    assert len(run.traces) == 1
    casts = [n for n in run.traces[0].raw_graph.nodes if n.kind == "op" and n.op.name == "cast"]
    assert any(n.attrs["dtype"] == "bfloat16" for n in casts)
    for name, losses in (("eager", eager), ("captured", captured)):
        np.testing.assert_allclose(losses, theirs, rtol=0.03, err_msg=f"{name} vs PyTorch")
        assert abs(losses[-5:].mean() - theirs[-5:].mean()) < 0.02 * theirs[-5:].mean(), name
    assert theirs[-5:].mean() < 0.9 * theirs[:5].mean(), f"not learning: {theirs}"
    # bfloat16 autocast stays close to float32 training, in both libraries
    np.testing.assert_allclose(eager, theirs_f32, rtol=0.05)


def make_cnn(torch):
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(16 * 4 * 4, 10))


def _cnn_loss(fw, model, images, labels):
    return fw.nn.functional.cross_entropy(model(images), labels)


def test_float16_autocast_cnn_with_grad_scaler_tracks_pytorch():
    train, _ = lk.data.digits()
    images, labels = (t.numpy() for t in train.tensors)
    order = np.random.default_rng(0).permutation(len(labels))[:32 * 30].reshape(30, 32)
    batches = [(images[ids], labels[ids]) for ids in order]
    torch.manual_seed(0)
    theirs = make_cnn(torch)
    ours = load_torch_state(make_cnn(lk), theirs)
    results = {}
    for fw, model in ((torch, theirs), (lk, ours)):
        opt = fw.optim.Adam(model.parameters(), lr=1e-2)
        # 2**24: the first scaled gradients overflow float16, so the first steps are skipped
        scaler = fw.amp.GradScaler("cpu", init_scale=2.0 ** 24, growth_interval=10)
        results[fw] = _train(fw, model, opt, None, batches, _cnn_loss, "float16", scaler=scaler,
                             clip=5.0)
    (mine, my_scales, _), (theirs_losses, their_scales, _) = results[lk], results[torch]
    # the same overflows, backoffs and growth; later, a gradient near float16's limit may
    # overflow in one library and not the other (rounding), moving the scale by one factor
    assert my_scales[:20] == their_scales[:20]
    assert their_scales[0] < 2.0 ** 24, "no step overflowed: the test checks nothing skipped"
    assert all(0.5 <= m / t <= 2.0 for m, t in zip(my_scales, their_scales))
    np.testing.assert_allclose(mine, theirs_losses, rtol=0.03)
    assert theirs_losses[-5:].mean() < 0.5 * theirs_losses[:5].mean()
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[key].numpy(), value.detach().numpy(),
                                   rtol=0.05, atol=0.05, err_msg=key)
