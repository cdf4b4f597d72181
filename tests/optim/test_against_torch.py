"""Every optimiser against PyTorch's: the same model, data and options, 15 steps in float64
(two parameter groups with their own options), parameters compared after every step; eager and
captured (one lk.function holding the whole training step); the state_dict layout (PyTorch's
keys), round trips that continue identically, loading PyTorch's own state_dict, and LBFGS with
and without its line search."""
import numpy as np
import pytest
import torch

import labkit as lk

STEPS = 15
RNG = np.random.default_rng(0)
W1, B1 = RNG.standard_normal((4, 6)) * 0.5, RNG.standard_normal(6) * 0.1
W2, B2 = RNG.standard_normal((6, 3)) * 0.5, RNG.standard_normal(3) * 0.1
X, Y = RNG.standard_normal((8, 4)), RNG.integers(0, 3, 8)


@pytest.fixture(autouse=True)
def _torch_float64():
    # PyTorch keeps step counts (and NAdam's mu_product) in its default dtype
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


def _params(lib):
    return [lib.nn.Parameter(lib.tensor(a.copy())) for a in (W1, B1, W2, B2)]


def _loss(lib, params):
    w1, b1, w2, b2 = params
    h = (lib.tensor(X) @ w1 + b1).tanh()
    return lib.nn.functional.cross_entropy(h @ w2 + b2, lib.tensor(Y))


def _groups(params, first, second):
    """Two parameter groups (the first layer, the second) with their own options."""
    return [dict(params=params[:2], **first), dict(params=params[2:], **second)]


# (class name, defaults, per-group options of group 1, of group 2)
CASES = [
    ("SGD", dict(lr=0.1), {}, dict(lr=0.3)),
    ("SGD", dict(lr=0.1, momentum=0.9), dict(dampening=0.3), dict(nesterov=True)),
    ("SGD", dict(lr=0.05, momentum=0.8, weight_decay=0.1, maximize=True), {}, {}),
    ("SGD", dict(lr=0.05, momentum=0.8, weight_decay=0.1), dict(dampening=0.3),
     dict(nesterov=True)),        # the decay inside the buffer, and (Nesterov) outside it
    ("Adam", dict(lr=0.05), {}, dict(lr=0.01, betas=(0.8, 0.95))),
    ("Adam", dict(lr=0.05, amsgrad=True, weight_decay=0.1), {}, dict(amsgrad=False)),
    ("Adam", dict(lr=0.05, maximize=True, eps=1e-6), {}, dict(decoupled_weight_decay=True,
                                                               weight_decay=0.2)),
    ("AdamW", dict(lr=0.05), {}, dict(weight_decay=0.3)),
    ("AdamW", dict(lr=0.05, amsgrad=True), dict(maximize=True), {}),
    ("Adagrad", dict(lr=0.2), dict(lr_decay=0.05), dict(initial_accumulator_value=0.3)),
    ("Adagrad", dict(lr=0.2, weight_decay=0.1, eps=1e-6, maximize=True), {}, {}),
    ("Adadelta", dict(), {}, dict(rho=0.7, lr=0.5)),
    ("Adadelta", dict(lr=2.0, weight_decay=0.1, maximize=True), dict(eps=1e-4), {}),
    ("Adamax", dict(lr=0.05), {}, dict(betas=(0.7, 0.9))),
    ("Adamax", dict(lr=0.05, weight_decay=0.1, maximize=True), {}, {}),
    ("NAdam", dict(lr=0.05), {}, dict(momentum_decay=0.01)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1), dict(decoupled_weight_decay=True),
     dict(maximize=True)),
    ("RAdam", dict(lr=0.05), {}, dict(betas=(0.8, 0.9))),     # rectified from step 6 there
    ("RAdam", dict(lr=0.05, weight_decay=0.1), dict(decoupled_weight_decay=True), {}),
    ("RMSprop", dict(lr=0.01), {}, dict(alpha=0.8)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5), dict(weight_decay=0.1),
     dict(centered=False, maximize=True)),
]
IDS = [f"{name}-{i}" for i, (name, *_) in enumerate(CASES)]


def _torch_run(name, defaults, first, second, steps=STEPS):
    params = _params(torch)
    opt = getattr(torch.optim, name)(_groups(params, first, second), **defaults)
    trail = []
    for _ in range(steps):
        opt.zero_grad()
        _loss(torch, params).backward()
        opt.step()
        trail.append([p.detach().numpy().copy() for p in params])
    return trail, opt


def _lk_run(name, defaults, first, second, steps=STEPS, capture=False):
    params = _params(lk)
    opt = getattr(lk.optim, name)(_groups(params, first, second), **defaults)

    def step():
        opt.zero_grad()
        loss = _loss(lk, params)
        loss.backward()
        opt.step()
        return loss
    run = lk.function(step) if capture else step
    trail = []
    for _ in range(steps):
        run()
        trail.append([p.detach().numpy().copy() for p in params])
    return trail, opt, run


def _assert_trails(ours, theirs, rtol=1e-10, atol=1e-12):
    for k, (a, b) in enumerate(zip(ours, theirs)):
        for i, (x, y) in enumerate(zip(a, b)):
            np.testing.assert_allclose(x, y, rtol=rtol, atol=atol,
                                       err_msg=f"step {k + 1}, parameter {i}")


@pytest.mark.parametrize("name,defaults,first,second", CASES, ids=IDS)
def test_trajectory_matches_pytorch(name, defaults, first, second):
    theirs, _ = _torch_run(name, defaults, first, second)
    ours, _, _ = _lk_run(name, defaults, first, second)
    _assert_trails(ours, theirs)


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_adam_parameters_whose_step_counts_differ_match_pytorch(name):
    """Eagerly, parameters whose counts agree share one step's bias corrections: here the
    second layer gets no gradient on every third step, so its count falls behind, and the
    learning rate changes halfway."""
    trails = {}
    for lib in (torch, lk):
        params = _params(lib)
        opt = getattr(lib.optim, name)(params, lr=0.05, weight_decay=0.01)
        trail = []
        for k in range(STEPS):
            opt.zero_grad(set_to_none=True)
            _loss(lib, params).backward()
            if k % 3 == 2:
                params[2].grad = params[3].grad = None
            if k == STEPS // 2:
                opt.param_groups[0]["lr"] = 0.02
            opt.step()
            trail.append([p.detach().numpy().copy() for p in params])
        trails[lib] = trail
    _assert_trails(trails[lk], trails[torch])


@pytest.mark.parametrize("name,defaults,first,second", CASES, ids=IDS)
def test_captured_step_equals_eager(name, defaults, first, second):
    eager, _, _ = _lk_run(name, defaults, first, second)
    captured, _, run = _lk_run(name, defaults, first, second, capture=True)
    _assert_trails(captured, eager, rtol=1e-12, atol=1e-14)
    assert len(run.traces) == 1


@pytest.mark.parametrize("name,defaults,first,second", CASES, ids=IDS)
def test_state_dict_has_pytorchs_layout_and_round_trips(name, defaults, first, second):
    _, theirs = _torch_run(name, defaults, first, second, steps=3)
    ours_trail, ours, _ = _lk_run(name, defaults, first, second, steps=3)
    mine, their = ours.state_dict(), theirs.state_dict()
    assert [sorted(g) for g in mine["param_groups"]] == \
        [sorted(g) for g in their["param_groups"]]
    for a, b in zip(mine["param_groups"], their["param_groups"]):
        assert {k: v for k, v in a.items()} == {k: v for k, v in b.items()}
    assert sorted(mine["state"]) == sorted(their["state"])
    for i in their["state"]:
        assert sorted(mine["state"][i]) == sorted(their["state"][i])
        for key, value in their["state"][i].items():
            np.testing.assert_allclose(mine["state"][i][key].numpy(), value.numpy(),
                                       rtol=1e-10, atol=1e-12, err_msg=f"{name} {i} {key}")
    # a fresh optimiser loading labkit's state, or PyTorch's, continues as the original does
    cont, _ = _torch_run(name, defaults, first, second, steps=6)
    for saved in (mine, _from_torch(their)):
        params = [lk.nn.Parameter(lk.tensor(a.copy())) for a in ours_trail[-1]]
        opt = getattr(lk.optim, name)(_groups(params, {}, {}), lr=123.0)
        opt.load_state_dict(saved)
        assert [g["lr"] for g in opt.param_groups] == [g["lr"] for g in theirs.param_groups]
        trail = []
        for _ in range(3):
            opt.zero_grad()
            _loss(lk, params).backward()
            opt.step()
            trail.append([p.detach().numpy().copy() for p in params])
        _assert_trails(trail, cont[3:])


def _from_torch(state):
    def convert(v):
        if isinstance(v, torch.Tensor):
            return lk.tensor(v.detach().numpy().copy())
        if isinstance(v, dict):
            return {k: convert(x) for k, x in v.items()}
        if isinstance(v, list):
            return [convert(x) for x in v]
        return v
    return convert(state)


def test_float32_tracks_pytorch():
    name, defaults = "AdamW", dict(lr=0.05)
    torch.set_default_dtype(torch.float32)
    tp = [torch.nn.Parameter(torch.tensor(a, dtype=torch.float32)) for a in (W1, B1, W2, B2)]
    lp = [lk.nn.Parameter(lk.tensor(a, dtype=lk.float32)) for a in (W1, B1, W2, B2)]
    t_opt, l_opt = torch.optim.AdamW(tp, **defaults), lk.optim.AdamW(lp, **defaults)
    x = X.astype(np.float32)
    for _ in range(STEPS):
        for lib, params, opt in ((torch, tp, t_opt), (lk, lp, l_opt)):
            opt.zero_grad()
            w1, b1, w2, b2 = params
            lib.nn.functional.cross_entropy((lib.tensor(x) @ w1 + b1).tanh() @ w2 + b2,
                                            lib.tensor(Y)).backward()
            opt.step()
    for a, b in zip(lp, tp):
        assert a.dtype is lk.float32
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_add_param_group_and_named_parameters():
    params = _params(lk)
    opt = lk.optim.Adam(params[:2], lr=0.1)
    opt.add_param_group({"params": params[2:], "lr": 0.01, "amsgrad": True})
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.01]
    assert opt.param_groups[1]["betas"] == (0.9, 0.999) and opt.param_groups[1]["amsgrad"]
    with pytest.raises(ValueError, match="appears twice"):
        opt.add_param_group({"params": [params[0]]})
    named = lk.optim.SGD([("w1", params[0]), ("b1", params[1])], lr=0.1)
    assert named.param_groups[0]["param_names"] == ["w1", "b1"]
    assert named.state_dict()["param_groups"][0]["param_names"] == ["w1", "b1"]
    with pytest.raises(ValueError, match="name"):
        lk.optim.SGD([("w1", params[0]), params[1]], lr=0.1)


def test_hyperparameter_errors():
    w = [lk.nn.Parameter(lk.zeros(2))]
    for cls, kwargs, match in [(lk.optim.Adam, dict(betas=(1.0, 0.9)), "betas"),
                               (lk.optim.SGD, dict(lr=-1.0), "learning rate"),
                               (lk.optim.SGD, dict(lr=0.1, nesterov=True), "Nesterov"),
                               (lk.optim.RMSprop, dict(momentum=-0.1), "momentum"),
                               (lk.optim.Adadelta, dict(rho=1.5), "rho"),
                               (lk.optim.NAdam, dict(momentum_decay=-1), "momentum_decay"),
                               (lk.optim.LBFGS, dict(line_search_fn="armijo"), "strong_wolfe")]:
        with pytest.raises(ValueError, match=match):
            cls(w, **kwargs)


# ---- LBFGS -------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [dict(), dict(lr=0.5, history_size=3, max_iter=5),
                                    dict(line_search_fn="strong_wolfe"),
                                    dict(line_search_fn="strong_wolfe", history_size=2,
                                         max_iter=7, tolerance_grad=1e-5)],
                         ids=["plain", "short_history", "strong_wolfe", "wolfe_short"])
def test_lbfgs_matches_pytorch(kwargs):
    rng = np.random.default_rng(1)
    p0, x, y = rng.standard_normal((4, 3)) * 0.3, rng.standard_normal((6, 4)), \
        rng.standard_normal((6, 3))
    results = []
    for lib in (torch, lk):
        p = lib.nn.Parameter(lib.tensor(p0.copy()))
        opt = lib.optim.LBFGS([p], **kwargs)

        def closure():
            opt.zero_grad()
            out = lib.tensor(x) @ p
            loss = ((out - lib.tensor(y)) ** 2).sum() * 0.05 + (out.tanh() ** 2).sum() * 0.02
            loss.backward()
            return loss
        losses = [float(opt.step(closure).detach()) for _ in range(4)]
        state = opt.state_dict()["state"][0]
        results.append((p.detach().numpy().copy(), losses, state["func_evals"],
                        state["n_iter"], sorted(state)))
    (tp, tl, tf, tn, tk), (lp, ll, lf, ln, lkeys) = results
    np.testing.assert_allclose(lp, tp, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(ll, tl, rtol=1e-12)
    assert (lf, ln, lkeys) == (tf, tn, tk)


def test_lbfgs_state_dict_round_trip_and_capture_error():
    p = lk.nn.Parameter(lk.tensor([1.5, -0.5], dtype=lk.float64))
    opt = lk.optim.LBFGS([p], max_iter=3, history_size=4)

    def closure():
        opt.zero_grad()
        loss = ((p - lk.tensor([1.0, 2.0], dtype=lk.float64)) ** 4).sum()
        loss.backward()
        return loss
    opt.step(closure)
    saved = opt.state_dict()
    q = lk.nn.Parameter(lk.tensor(p.detach().numpy().copy()))
    other = lk.optim.LBFGS([q], max_iter=3, history_size=4)
    other.load_state_dict(saved)
    opt.step(closure)

    def closure_q():
        other.zero_grad()
        loss = ((q - lk.tensor([1.0, 2.0], dtype=lk.float64)) ** 4).sum()
        loss.backward()
        return loss
    other.step(closure_q)
    np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-14)
    with pytest.raises(lk.LabkitError, match="LBFGS.step cannot run inside lk.function"):
        lk.function(lambda: opt.step(closure))()
    with pytest.raises(ValueError, match="parameter groups"):
        lk.optim.LBFGS([{"params": [p]}, {"params": [q]}])


# ---- hyperparameters under capture --------------------------------------------------------
def test_group_values_stay_numbers_and_captured_steps_follow_them():
    params = _params(lk)
    opt = lk.optim.SGD(params, lr=0.1, momentum=0.9)
    step = lk.function(lambda: (opt.zero_grad(), _loss(lk, params).backward(), opt.step()))
    step()
    group = opt.param_groups[0]
    assert isinstance(group["lr"], float) and group["lr"] == 0.1
    assert f"{group['lr']}" == "0.1" and group["lr"] * 2 == 0.2
    group["lr"] = 0.0
    group["momentum"] = 0.0
    before = [p.detach().numpy().copy() for p in params]
    step()                           # no rate, no momentum: nothing moves
    for a, p in zip(before, params):
        np.testing.assert_array_equal(p.detach().numpy(), a)
    # the rate is read at run time; momentum going to zero changes the rule's ops: a retrace
    assert len(step.traces) == 2
    assert step.traces[1].reason.startswith("optimizer SGD param_groups[0]['momentum'] is zero "
                                            "now (0.0); the trace was made with it non-zero")


def test_a_switch_changed_after_capture_retraces_and_matches_eager():
    runs = []
    for captured in (False, True):
        params = _params(lk)
        opt = lk.optim.SGD(params, lr=0.1)

        def body():
            opt.zero_grad()
            _loss(lk, params).backward()
            opt.step()
        step = lk.function(body) if captured else body
        step()
        opt.param_groups[0]["weight_decay"] = 0.1
        step()
        opt.param_groups[0]["lr"] = 0.5           # a rate is no switch: read at run time
        step()
        runs.append([p.detach().numpy().copy() for p in params])
    for a, b in zip(*runs):
        np.testing.assert_allclose(b, a, rtol=1e-6)
    assert len(step.traces) == 2
    assert "param_groups[0]['weight_decay'] is non-zero now (0.1)" in step.traces[1].reason


def test_tensor_learning_rate_under_capture():
    params = _params(lk)
    lr = lk.Variable(0.1, trainable=False, dtype=lk.float64)
    opt = lk.optim.SGD(params, lr=lr)
    step = lk.function(lambda: (opt.zero_grad(), _loss(lk, params).backward(), opt.step()))
    step()
    lr.assign(0.0)
    before = [p.detach().numpy().copy() for p in params]
    step()
    for a, p in zip(before, params):
        np.testing.assert_array_equal(p.detach().numpy(), a)
