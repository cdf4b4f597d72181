"""An op declared without a gradient rule: backward through it is an error naming the op (not a
silent zero); one declared with vjp=None has no gradient, on purpose."""
import pytest

import labkit as lk
from labkit.tensor.shape_rules import same_as_first


def test_backward_through_an_op_without_a_rule_names_it():
    softsign = lk.op("softsign_no_rule", shape=same_as_first, register=False)(
        lambda xp, x: x / (1 + xp.abs(x)))
    x = lk.tensor([1.0, -2.0], requires_grad=True)
    y = softsign(x) + x                            # the second term alone would give 1, 1
    assert y.requires_grad
    with pytest.raises(lk.GradError, match=r"backward through softsign_no_rule: the op was "
                                           r"declared without a gradient rule.*vjp=None"):
        y.sum().backward()
    assert x.grad is None
    assert not softsign.differentiable
    with pytest.raises(lk.GradError, match="softsign_no_rule"):
        lk.function(lk.grad(lambda x: softsign(x).sum()))(x)


def test_an_op_declared_with_no_gradient_gives_none_on_purpose():
    rounded = lk.op("round_no_grad", shape=same_as_first, vjp=None, register=False)(
        lambda xp, x: xp.round(x))
    x = lk.tensor([1.2, -2.7], requires_grad=True)
    assert not rounded(x).requires_grad
    (rounded(x) + x).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]
