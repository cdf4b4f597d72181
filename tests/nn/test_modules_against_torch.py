"""Every ``lk.nn`` module against PyTorch's: the same ``state_dict`` names and shapes, outputs,
gradients and buffers, from the cases in ``tests/nn/cases/`` (see ``module_cases.py``); and the
walk over ``lk.nn`` that fails for a module class without a case."""
import inspect

import numpy as np
import pytest
import torch

import labkit as lk

from .module_cases import collected

ALL = collected()

# lk.nn classes that are not layers to run on an input (bases, parameter containers...)
NOT_LAYERS = {"Module", "Parameter", "ModuleDict", "ParameterList", "ParameterDict", "RNNBase",
              "RNNCellBase"}


def _arrays(case, rng):
    x = case.inputs(rng)
    return x if isinstance(x, tuple) else (x,)


def _to(lib, a, requires_grad):
    if not isinstance(a, np.ndarray):
        return a
    t = lib.tensor(a)
    return t.requires_grad_() if requires_grad and a.dtype.kind == "f" else t


def _leaves(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _leaves(o)]
    return [out] if out is not None else []


def _run(case, lib, module, arrays):
    module.double()
    module.train(case.train)
    inputs = [_to(lib, a, case.grad) for a in arrays]
    out = module(*inputs, **case.kwargs)
    out = case.output(out) if case.output else out
    return inputs, _leaves(out)


def _numpy(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else t.detach().numpy()


@pytest.mark.parametrize("case", ALL, ids=repr)
def test_module_matches_torch(case):
    torch.manual_seed(0)
    theirs = case.build(torch.nn)
    ours = case.build(lk.nn)
    state = {k: lk.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()}
    ours.load_state_dict(state)                 # strict: PyTorch's key names and shapes
    arrays = _arrays(case, np.random.default_rng(0))
    t_in, t_out = _run(case, torch, theirs, arrays)
    l_in, l_out = _run(case, lk, ours, arrays)
    assert len(l_out) == len(t_out), f"{case.name}: {len(l_out)} outputs, PyTorch {len(t_out)}"
    for i, (a, b) in enumerate(zip(l_out, t_out)):
        assert tuple(a.shape) == tuple(b.shape), f"{case.name}: output {i} shape"
        np.testing.assert_allclose(_numpy(a), _numpy(b), rtol=case.rtol, atol=case.atol,
                                   err_msg=f"{case.name}: output {i}")
    for key, value in theirs.state_dict().items():      # buffers after the call (running stats)
        np.testing.assert_allclose(ours.state_dict()[key].numpy(), value.detach().numpy(),
                                   rtol=case.rtol, atol=case.atol, err_msg=f"{case.name}: {key}")
    if not case.grad:
        return
    rng = np.random.default_rng(1)
    floats = [(a, b) for a, b in zip(l_out, t_out) if b.is_floating_point() and b.requires_grad]
    cots = [rng.standard_normal(tuple(b.shape)) for _, b in floats]
    sum((a * lk.tensor(c)).sum() for (a, _), c in zip(floats, cots)).backward()
    sum((b * torch.tensor(c)).sum() for (_, b), c in zip(floats, cots)).backward()
    for name, p in theirs.named_parameters():
        mine = dict(ours.named_parameters())[name].grad
        if p.grad is None:
            assert mine is None or not np.any(mine.numpy()), f"{case.name}: grad of {name}"
            continue
        np.testing.assert_allclose(mine.numpy(), p.grad.numpy(), rtol=max(case.rtol, 1e-6),
                                   atol=max(case.atol, 1e-8), err_msg=f"{case.name}: grad {name}")
    for i, (a, b) in enumerate(zip(l_in, t_in)):
        if isinstance(b, torch.Tensor) and b.grad is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=max(case.rtol, 1e-6),
                                       atol=max(case.atol, 1e-8),
                                       err_msg=f"{case.name}: grad of input {i}")


def _module_classes():
    return sorted(name for name, obj in vars(lk.nn).items()
                  if inspect.isclass(obj) and issubclass(obj, lk.nn.Module)
                  and name not in NOT_LAYERS)


def test_every_nn_module_has_a_case():
    covered = set()
    for case in ALL:
        covered.add(case.module or type(case.build(lk.nn)).__name__)
    missing = sorted(set(_module_classes()) - covered)
    assert not missing, (f"lk.nn modules without a case in tests/nn/cases/: {missing}. Add a "
                         f"ModuleCase (tests/nn/module_cases.py) for each.")
