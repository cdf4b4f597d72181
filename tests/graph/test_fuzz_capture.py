"""A differential fuzzer: random programs run eagerly and captured (``lk.function``) from the same
seed must agree: outputs and gradients within 1e-6 relative (float64), random draws exactly;
the captured function traces once, and every call draws new random values (the generator
moves on, to the same position as eager code's).

A program is a list of steps over a pool of (3, 4) float64 values (two made from the input and
result); a step applies one of the ops below to one or two values of the pool. The ops cover
elementwise math, reductions, matmul, indexing, random draws and dropout, in-place updates, and
``lk.cond`` / ``lk.while_loop`` / ``lk.scan``; a program whose eager backward raises (an in-place
write into a value a gradient reads) must raise the same error captured. The loss, the mean square of the last two
values, is differentiated in the program (``backward()``) with respect to two parameters.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import labkit as lk
import labkit.nn.functional as F

F64 = lk.float64


def _inplace(v, w):
    t = v.clone()
    t.add_(w)
    t.mul_(0.5)
    return t


def _setitem(v, w):
    t = v * 1.0
    t[0] = w[1]
    return t


def _write_after_read(v, w):
    t = v * 1.0
    s = t.tanh()          # tanh's gradient reads its output: t's write below does not matter
    r = t.sin()           # sin's gradient reads t: backward raises, eagerly and captured
    t.add_(w)
    return s + r + t


UNARY = {
    "tanh": lambda v, p: v.tanh(),
    "sin": lambda v, p: lk.sin(v),
    "relu": lambda v, p: F.relu(v),
    "exp": lambda v, p: v.clamp(-3.0, 3.0).exp(),
    "square": lambda v, p: v * v,
    "sqrt": lambda v, p: (v.abs() + 1.0).sqrt(),
    "sigmoid": lambda v, p: v.sigmoid(),
    "neg": lambda v, p: -v,
    "center": lambda v, p: v - v.mean(dim=1, keepdim=True),
    "colmax": lambda v, p: v - v.max(dim=0, keepdim=True).values,
    "softmax": lambda v, p: lk.softmax(v, dim=1),
    "logsumexp": lambda v, p: v - lk.logsumexp(v, dim=0, keepdim=True),
    "permute": lambda v, p: v[:, [2, 0, 3, 1]],
    "flip": lambda v, p: v.flip(0),
    "roll": lambda v, p: lk.cat([v[1:], v[:1]], 0),
    "transpose": lambda v, p: (v.T @ v)[:3] * 0.1,
    "matmul": lambda v, p: v @ p["w"],
    "bias": lambda v, p: v + p["b"],
    "cumsum": lambda v, p: v.cumsum(1) * 0.5,
    "dropout": lambda v, p: F.dropout(v, 0.3),
    "noise": lambda v, p: v + lk.randn(3, 4, dtype=F64) * 0.1,
    "mask": lambda v, p: v * lk.rand(3, 4, dtype=F64),
    "bernoulli": lambda v, p: v * lk.bernoulli(lk.full((3, 4), 0.7, dtype=F64)),
    "scan": lambda v, p: lk.scan(lambda c, r: (c + r, c * r + r), lk.zeros(4, dtype=F64), v)[1],
}
BINARY = {
    "add": lambda v, w: v + w,
    "sub": lambda v, w: v - w,
    "mul": lambda v, w: v * w,
    "div": lambda v, w: v / (w * w + 1.0),
    "maximum": lambda v, w: lk.maximum(v, w),
    "where": lambda v, w: lk.where(v > w, v, w * 0.5),
    "inplace": _inplace,
    "setitem": _setitem,
    "write_after_read": _write_after_read,
    "cond": lambda v, w: lk.cond(v.sum() > 0, lambda a, b: a * b, lambda a, b: a - b, v, w),
    "while": lambda v, w: lk.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * 0.5 + w),
                                        (0, v))[1],
}
RANDOM = {"dropout", "noise", "mask", "bernoulli"}

steps = st.lists(st.one_of(
    st.tuples(st.sampled_from(sorted(UNARY)), st.integers(0, 99), st.just(0)),
    st.tuples(st.sampled_from(sorted(BINARY)), st.integers(0, 99), st.integers(0, 99))),
    min_size=1, max_size=8)


def run_program(program, x, params):
    pool = [x @ params["w"], x + params["b"]]
    for name, i, j in program:
        v, w = pool[i % len(pool)], pool[j % len(pool)]
        pool.append(UNARY[name](v, params) if name in UNARY else BINARY[name](v, w))
    out = pool[-1] + pool[-2]
    return out, (out * out).mean()


def calls(program, capture, seed):
    """Two calls of the program (eager or captured) from ``seed``: outputs and gradients."""
    rng = np.random.default_rng(1)
    params = {"w": lk.tensor(rng.standard_normal((4, 4)) * 0.5, requires_grad=True),
              "b": lk.tensor(rng.standard_normal(4), requires_grad=True)}
    x = lk.tensor(rng.standard_normal((3, 4)))

    def step(x):
        out, loss = run_program(program, x, params)
        loss.backward()
        return out
    fn = lk.function(step) if capture else step
    lk.manual_seed(seed)
    results = []
    for _ in range(2):
        out = fn(x).detach().numpy()
        results.append((out, *(None if p.grad is None else p.grad.numpy().copy()
                                for p in params.values()), lk.get_rng_state()["state"]))
        for p in params.values():
            p.grad = None
    return results, fn


@settings(max_examples=int(__import__("os").environ.get("FUZZ_EXAMPLES", 300)), derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(steps, st.integers(0, 2 ** 16))
def test_captured_programs_equal_eager(program, seed):
    try:
        eager, _ = calls(program, False, seed)
    except lk.GradError as error:      # an in-place write into a value backward reads
        with pytest.raises(lk.GradError) as captured_error:
            calls(program, True, seed)
        assert str(captured_error.value) == str(error)
        return
    captured, fn = calls(program, True, seed)
    assert len(fn.traces) == 1, fn.traces
    for call, (want, got) in enumerate(zip(eager, captured)):
        assert want[-1] == got[-1], f"the generators' positions differ after call {call + 1}"
        for what, a, b in zip(("output", "grad w", "grad b"), want[:-1], got[:-1]):
            assert (a is None) == (b is None), f"{what}, call {call + 1}, program {program}"
            if a is not None:
                np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-9,
                                           err_msg=f"{what}, call {call + 1}, program {program}")
    if any(name in RANDOM for name, _, _ in program):      # each call draws (the stream moves)
        assert captured[0][-1] != captured[1][-1], f"the second call drew nothing: {program}"
