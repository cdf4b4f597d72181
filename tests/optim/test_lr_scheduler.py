"""``lk.optim.lr_scheduler`` against ``torch.optim.lr_scheduler``: every scheduler's rates (and
the momentum OneCycleLR and CyclicLR set) for 60 steps, two parameter groups, with SGD and with
Adam; state_dict round trips that resume the same sequence; ReduceLROnPlateau's modes; errors
and warnings; and a captured training step that follows the schedule without retracing."""
import warnings

import numpy as np
import pytest
import torch

import labkit as lk

STEPS = 60


def _optimizer(lib, kind):
    params = [lib.nn.Parameter(lib.zeros(2)) for _ in range(2)]
    groups = [{"params": [p], "lr": 0.1 * (i + 1)} for i, p in enumerate(params)]
    if kind == "SGD":
        return lib.optim.SGD(groups, lr=0.1, momentum=0.9)
    return lib.optim.Adam(groups, lr=0.1)


def _sched(lib, name, opt):
    S = lib.optim.lr_scheduler
    return {
        "LambdaLR": lambda: S.LambdaLR(opt, lambda e: 0.95 ** e),
        "LambdaLR_per_group": lambda: S.LambdaLR(opt, [lambda e: 0.9 ** e,
                                                       lambda e: 1 / (e + 1)]),
        "MultiplicativeLR": lambda: S.MultiplicativeLR(opt, lambda e: 0.97),
        "StepLR": lambda: S.StepLR(opt, step_size=7, gamma=0.3),
        "MultiStepLR": lambda: S.MultiStepLR(opt, milestones=[5, 12, 12, 30], gamma=0.5),
        "ConstantLR": lambda: S.ConstantLR(opt, factor=0.3, total_iters=10),
        "LinearLR": lambda: S.LinearLR(opt, start_factor=0.2, end_factor=0.9, total_iters=17),
        "ExponentialLR": lambda: S.ExponentialLR(opt, gamma=0.93),
        "PolynomialLR": lambda: S.PolynomialLR(opt, total_iters=30, power=2.0),
        "CosineAnnealingLR": lambda: S.CosineAnnealingLR(opt, T_max=10, eta_min=0.001),
        "CosineAnnealingWarmRestarts": lambda: S.CosineAnnealingWarmRestarts(
            opt, T_0=5, T_mult=2, eta_min=0.001),
        "OneCycleLR": lambda: S.OneCycleLR(opt, max_lr=[1.0, 2.0], total_steps=STEPS),
        "OneCycleLR_three_phase": lambda: S.OneCycleLR(
            opt, max_lr=1.0, epochs=6, steps_per_epoch=10, three_phase=True,
            anneal_strategy="linear"),
        "CyclicLR_triangular2": lambda: S.CyclicLR(opt, base_lr=0.01, max_lr=0.1,
                                                   step_size_up=4, step_size_down=7,
                                                   mode="triangular2"),
        "CyclicLR_exp_range": lambda: S.CyclicLR(opt, base_lr=[0.01, 0.02], max_lr=0.1,
                                                 step_size_up=5, mode="exp_range",
                                                 gamma=0.97),
        "CyclicLR_scale_fn": lambda: S.CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=3,
                                                scale_fn=lambda x: 0.9 ** x,
                                                scale_mode="iterations",
                                                cycle_momentum=False),
        "SequentialLR": lambda: S.SequentialLR(
            opt, [S.LinearLR(opt, start_factor=0.1, total_iters=5),
                  S.CosineAnnealingLR(opt, T_max=20)], milestones=[5]),
        "ChainedScheduler": lambda: S.ChainedScheduler(
            [S.ConstantLR(opt, factor=0.5, total_iters=4), S.ExponentialLR(opt, gamma=0.95)]),
    }[name]()


NAMES = ["LambdaLR", "LambdaLR_per_group", "MultiplicativeLR", "StepLR", "MultiStepLR",
         "ConstantLR", "LinearLR", "ExponentialLR", "PolynomialLR", "CosineAnnealingLR",
         "CosineAnnealingWarmRestarts", "OneCycleLR", "OneCycleLR_three_phase",
         "CyclicLR_triangular2", "CyclicLR_exp_range", "CyclicLR_scale_fn", "SequentialLR",
         "ChainedScheduler"]


def _momentum(group):
    return group["betas"][0] if "betas" in group else group.get("momentum")


def _sequence(lib, name, kind, steps=STEPS):
    opt = _optimizer(lib, kind)
    sched = _sched(lib, name, opt)
    seen = []
    for _ in range(steps):
        opt.step()
        sched.step()
        seen.append([g["lr"] for g in opt.param_groups] + sched.get_last_lr()
                    + [_momentum(g) for g in opt.param_groups])
    return seen, opt, sched


@pytest.mark.parametrize("kind", ["SGD", "Adam"])
@pytest.mark.parametrize("name", NAMES)
def test_rates_match_pytorch(name, kind):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs, _, _ = _sequence(torch, name, kind)
        ours, opt, _ = _sequence(lk, name, kind)
    np.testing.assert_allclose(np.array(ours, float), np.array(theirs, float), rtol=1e-13,
                               atol=1e-15)
    assert all(isinstance(g["lr"], float) for g in opt.param_groups)


@pytest.mark.parametrize("name", NAMES)
def test_state_dict_round_trip_resumes_the_sequence(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full, _, _ = _sequence(lk, name, "SGD")
        _, opt, sched = _sequence(lk, name, "SGD", steps=20)
        saved_opt, saved = opt.state_dict(), sched.state_dict()
        assert "optimizer" not in saved
        opt2 = _optimizer(lk, "SGD")
        sched2 = _sched(lk, name, opt2)
        opt2.load_state_dict(saved_opt)
        sched2.load_state_dict(saved)
        rest = []
        for _ in range(STEPS - 20):
            opt2.step()
            sched2.step()
            rest.append([g["lr"] for g in opt2.param_groups] + sched2.get_last_lr()
                        + [_momentum(g) for g in opt2.param_groups])
    np.testing.assert_allclose(np.array(rest, float), np.array(full[20:], float), rtol=1e-13)


@pytest.mark.parametrize("kwargs", [dict(), dict(mode="max", threshold_mode="abs",
                                                 threshold=0.01),
                                    dict(factor=0.5, patience=2, cooldown=3,
                                         min_lr=[0.001, 0.05]),
                                    dict(mode="min", threshold_mode="abs", patience=0,
                                         eps=1e-3)])
def test_reduce_lr_on_plateau_matches_pytorch(kwargs):
    metrics = [1.0 / (1 + i) if i < 10 else 0.1 + (i % 3) * 0.01 for i in range(STEPS)]
    out = []
    for lib in (torch, lk):
        opt = _optimizer(lib, "SGD")
        sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
        seq = []
        for m in metrics:
            opt.step()
            sched.step(lib.tensor(m) if lib is lk else m)
            seq.append(sched.get_last_lr() + [sched.num_bad_epochs, sched.cooldown_counter])
        out.append(np.array(seq, float))
    np.testing.assert_allclose(out[1], out[0], rtol=1e-14)


def test_epoch_argument_uses_the_closed_form_as_pytorch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = []
        for lib in (torch, lk):
            opt = _optimizer(lib, "SGD")
            sched = lib.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
            seq = []
            for epoch in [1, 2, 7, 4, 10]:
                opt.step()
                sched.step(epoch)
                seq.append(sched.get_last_lr())
            cawr = lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(
                _optimizer(lib, "SGD"), T_0=4, T_mult=2)
            for epoch in [0.5, 3.2, 7.9, 13.0, 2.0]:
                cawr.step(epoch)
                seq.append(cawr.get_last_lr())
            out.append(np.array(seq))
    np.testing.assert_allclose(out[1], out[0], rtol=1e-14)


def test_resuming_with_last_epoch():
    out = []
    for lib in (torch, lk):
        opt = _optimizer(lib, "SGD")
        for g in opt.param_groups:
            g["initial_lr"] = g["lr"]
        sched = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10, last_epoch=4)
        seq = [sched.get_last_lr()]
        for _ in range(8):
            opt.step()
            sched.step()
            seq.append(sched.get_last_lr())
        out.append(np.array(seq))
    np.testing.assert_allclose(out[1], out[0], rtol=1e-14)
    with pytest.raises(KeyError, match="initial_lr"):
        lk.optim.lr_scheduler.StepLR(_optimizer(lk, "SGD"), 3, last_epoch=5)


def test_errors_and_warnings():
    S, opt = lk.optim.lr_scheduler, _optimizer(lk, "SGD")
    with pytest.raises(TypeError, match="not an Optimizer"):
        S.StepLR(object(), 3)
    with pytest.raises(ValueError, match="start_factor"):
        S.LinearLR(opt, start_factor=0)
    with pytest.raises(ValueError, match="factor"):
        S.ConstantLR(opt, factor=2.0)
    with pytest.raises(ValueError, match="one milestone fewer"):
        S.SequentialLR(opt, [S.StepLR(opt, 3), S.StepLR(opt, 4)], milestones=[])
    with pytest.raises(ValueError, match="ReduceLROnPlateau"):
        S.ChainedScheduler([S.ReduceLROnPlateau(opt)])
    with pytest.raises(ValueError, match="total_steps"):
        S.OneCycleLR(opt, max_lr=1.0)
    with pytest.raises(ValueError, match="Tried to step 3 times"):
        one = S.OneCycleLR(opt, max_lr=1.0, total_steps=2)
        for _ in range(3):
            opt.step()
            one.step()
    with pytest.raises(ValueError, match="cycle_momentum"):
        S.OneCycleLR(lk.optim.Adagrad([lk.nn.Parameter(lk.zeros(1))]), 1.0, total_steps=5)
    with pytest.raises(ValueError, match="3 values.*2 parameter groups"):
        S.CyclicLR(opt, base_lr=[0.1, 0.1, 0.1], max_lr=1.0)
    fresh = _optimizer(lk, "SGD")
    sched = S.StepLR(fresh, 3)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sched.step()


# ---- a captured training step follows the schedule ---------------------------------------------
def _training(capture, sched_name, steps=24):
    rng = np.random.default_rng(0)
    x, y = lk.tensor(rng.standard_normal((16, 5))), lk.tensor(rng.integers(0, 3, 16))
    lk.manual_seed(0)
    model = lk.nn.Sequential(lk.nn.Linear(5, 8), lk.nn.Tanh(), lk.nn.Linear(8, 3)).double()
    if sched_name == "OneCycleLR":
        opt = lk.optim.AdamW(model.parameters(), lr=0.01)
        sched = lk.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=steps)
    else:
        opt = lk.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
        sched = lk.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.5)

    def step(x, y):
        opt.zero_grad()
        loss = lk.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        lk.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss
    run = lk.function(step) if capture else step
    losses = []
    for _ in range(steps):
        losses.append(run(x, y).item())
        sched.step()
    return np.array(losses), [p.detach().numpy() for p in model.parameters()], run


@pytest.mark.parametrize("sched_name", ["StepLR", "OneCycleLR"])
def test_captured_step_follows_the_schedule_without_retracing(sched_name):
    eager, p_eager, _ = _training(False, sched_name)
    captured, p_captured, run = _training(True, sched_name)
    np.testing.assert_allclose(captured, eager, rtol=1e-12)
    for a, b in zip(p_captured, p_eager):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13)
    assert len(run.traces) == 1
    # and the schedule mattered: a constant rate gives another trajectory
    assert not np.allclose(eager[-5:], _constant(sched_name)[-5:], rtol=1e-6)


def _constant(sched_name):
    rng = np.random.default_rng(0)
    x, y = lk.tensor(rng.standard_normal((16, 5))), lk.tensor(rng.integers(0, 3, 16))
    lk.manual_seed(0)
    model = lk.nn.Sequential(lk.nn.Linear(5, 8), lk.nn.Tanh(), lk.nn.Linear(8, 3)).double()
    opt = lk.optim.AdamW(model.parameters(), lr=0.01) if sched_name == "OneCycleLR" else \
        lk.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    losses = []
    for _ in range(24):
        opt.zero_grad()
        loss = lk.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        lk.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    return np.array(losses)


def test_scheduler_step_inside_a_captured_function_is_refused():
    opt = _optimizer(lk, "SGD")
    sched = lk.optim.lr_scheduler.StepLR(opt, 2)
    with pytest.raises(lk.LabkitError, match="outside the captured step"):
        lk.function(lambda: sched.step())()
