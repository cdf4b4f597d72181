"""DTensor on four virtual devices: layouts, redistribution, op propagation for the ops a
transformer uses (values against the same ops on one device, float64), gradients (against one
device's autodiff and finite differences), captured against eager, messages and their bytes,
and the errors for wrong use."""
import itertools

import numpy as np
import pytest

import labkit as lk
import labkit.nn.functional as F
from labkit.distributed.device_mesh import init_device_mesh
from labkit.distributed.tensor import (DTensor, Partial, Replicate, Shard, distribute_tensor)
from labkit.distributed.tensor.debug import CommDebugMode
from labkit.errors import DeviceError, ShapeError

F64 = lk.float64


def rand(*shape, seed=0):
    return lk.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=F64)


def close(a, b, tol=1e-12):
    a = a.full_tensor() if isinstance(a, DTensor) else a
    np.testing.assert_allclose(np.asarray(a.detach().numpy()), np.asarray(b.detach().numpy()), rtol=tol,
                               atol=tol)


ONE_D = [Shard(0), Shard(1), Replicate(), Partial()]


# ---- layouts ---------------------------------------------------------------------------------
@pytest.mark.parametrize("p", ONE_D, ids=str)
def test_distribute_and_full_tensor_1d(mesh1d, p):
    x = rand(8, 4)
    d = distribute_tensor(x, mesh1d, [p])
    close(d, x)
    assert d.shape == (8, 4) and d.placements == (p,)
    pieces = d.local_tensors()
    assert [mesh1d.device(c).name for c in pieces] == ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]
    if p == Shard(0):
        np.testing.assert_array_equal(pieces[(2,)].numpy(), x.numpy()[4:6])
    if p == Partial():
        assert np.abs(pieces[(1,)].numpy()).max() == 0


def test_pieces_own_their_memory(mesh1d):
    x = rand(8, 4)
    d = distribute_tensor(x, mesh1d, [Replicate()])
    d.to_local((0,)).numpy()[...] = 0.0
    assert np.abs(d.to_local((1,)).numpy()).max() > 0 and np.abs(x.numpy()).max() > 0


@pytest.mark.parametrize("p,q", list(itertools.product(ONE_D, ONE_D)), ids=str)
def test_redistribute_1d(mesh1d, p, q):
    x = rand(8, 4)
    d = distribute_tensor(x, mesh1d, [p]).redistribute(placements=[q])
    assert d.placements == (q,)
    close(d, x)


TWO_D = [Shard(0), Shard(1), Replicate(), Partial()]


@pytest.mark.parametrize("p", list(itertools.product(TWO_D, TWO_D)), ids=str)
def test_redistribute_2d_to_and_from_every_layout(mesh2d, p):
    x = rand(8, 4)
    d = distribute_tensor(x, mesh2d, list(p))
    close(d, x)
    for q in [(Replicate(), Replicate()), (Shard(1), Shard(0)), (Shard(0), Shard(0)),
              (Partial(), Shard(1))]:
        close(d.redistribute(placements=list(q)), x)


def test_nested_shards_follow_the_order(mesh2d):
    x = rand(8, 2)
    d = distribute_tensor(x, mesh2d, [Shard(0), Shard(0)])
    # mesh dim 0 splits first: (dp=1, tp=0) holds rows 4..5
    np.testing.assert_array_equal(d.to_local((1, 0)).numpy(), x.numpy()[4:6])
    inner = d.redistribute(placements=[Replicate(), Shard(0)])
    np.testing.assert_array_equal(inner.to_local((1, 1)).numpy(), x.numpy()[4:8])


def test_sub_mesh_replicates_along_the_other_dimension(mesh2d):
    x = rand(4, 6)
    d = distribute_tensor(x, mesh2d["tp"], [Shard(1)])
    assert d.placements == (Replicate(), Shard(1))
    np.testing.assert_array_equal(d.to_local((1, 1)).numpy(), x.numpy()[:, 3:])
    close(d, x)


def test_from_local_pieces(mesh1d):
    pieces = [rand(2, 3, seed=i) for i in range(4)]
    d = DTensor.from_local(pieces, mesh1d, [Shard(0)])
    assert d.shape == (8, 3)
    close(d, lk.cat(pieces, 0))
    s = DTensor.from_local(pieces, mesh1d, [Partial()])
    close(s, pieces[0] + pieces[1] + pieces[2] + pieces[3])


# ---- op propagation ------------------------------------------------------------------------------
def both(fn, *xs, placements):
    """``fn`` on plain tensors and on DTensors of them laid out as ``placements``."""
    ds = [distribute_tensor(x, placements[1], p) for x, p in zip(xs, placements[0])]
    return fn(*xs), fn(*ds)


@pytest.mark.parametrize("pa,pb", list(itertools.product(ONE_D, ONE_D)), ids=str)
def test_elementwise_broadcasting(mesh1d, pa, pb):
    a, b = rand(8, 4), rand(8, 4, seed=1)
    for fn in (lambda a, b: a + b, lambda a, b: a * b - 1.0, lambda a, b: (a / (b * b + 1)),
               lambda a, b: lk.tanh(a) + F.gelu(b), lambda a, b: lk.where(a > b, a, b)):
        plain, dist = both(fn, a, b, placements=([[pa], [pb]], mesh1d))
        close(dist, plain)


def test_elementwise_with_a_broadcast_row_and_numbers(mesh1d):
    a, bias = rand(8, 4), rand(4, seed=1)
    plain, dist = both(lambda a, b: (a + b) * 2.0 + 1.0, a, bias,
                       placements=([[Shard(0)], [Replicate()]], mesh1d))
    assert dist.placements == (Shard(0),)
    close(dist, plain)


def test_partial_sums_pass_through_linear_ops(mesh1d):
    a, b = rand(8, 4), rand(8, 4, seed=1)
    pa = distribute_tensor(a, mesh1d, [Partial()])
    pb = distribute_tensor(b, mesh1d, [Replicate()])
    with CommDebugMode() as comm:
        out = (pa * pb + pb) * 3.0
    assert out.placements == (Partial(),) and comm.get_total_counts() == 0
    close(out, (a * b + b) * 3.0)
    with CommDebugMode() as comm:
        e = lk.exp(pa)          # not linear: summed first
    assert comm.get_comm_counts() == {"all_reduce": 1}
    close(e, lk.exp(a))


@pytest.mark.parametrize("pa,pb", list(itertools.product(ONE_D, ONE_D)), ids=str)
def test_matmul(mesh1d, pa, pb):
    a, b = rand(8, 12), rand(12, 4, seed=1)
    plain, dist = both(lambda a, b: a @ b, a, b, placements=([[pa], [pb]], mesh1d))
    close(dist, plain)


def test_matmul_layouts_of_tensor_parallelism(mesh1d):
    x, w1, w2 = rand(8, 12), rand(16, 12, seed=1), rand(12, 16, seed=2)
    dx = distribute_tensor(x, mesh1d, [Replicate()])
    col = distribute_tensor(w1, mesh1d, [Shard(0)])       # Linear(12, 16) split by columns
    row = distribute_tensor(w2, mesh1d, [Shard(1)])       # Linear(16, 12) split by rows
    with CommDebugMode() as comm:
        h = F.linear(dx, col)
        y = F.linear(F.gelu(h), row)
    assert h.placements == (Shard(1),) and y.placements == (Partial(),)
    assert comm.get_total_counts() == 0
    close(y, F.linear(F.gelu(F.linear(x, w1)), w2), 1e-11)


def test_batched_matmul_with_split_heads(mesh1d):
    q, k = rand(2, 4, 6, 3), rand(2, 4, 6, 3, seed=1)
    plain, dist = both(lambda q, k: lk.softmax(q @ k.transpose(-2, -1), dim=-1), q, k,
                       placements=([[Shard(1)], [Shard(1)]], mesh1d))
    assert dist.placements == (Shard(1),)
    close(dist, plain)


@pytest.mark.parametrize("p", ONE_D, ids=str)
def test_reductions(mesh1d, p):
    x = rand(8, 4)
    for fn in (lambda t: t.sum(), lambda t: t.sum(0), lambda t: t.mean(1), lambda t: t.amax(0),
               lambda t: lk.sum(t * t, dim=1, keepdim=True), lambda t: t.max(1)[0]):
        plain, dist = both(fn, x, placements=([[p]], mesh1d))
        close(dist, plain)


@pytest.mark.parametrize("p", ONE_D, ids=str)
def test_softmax_and_layer_norm(mesh1d, p):
    x, w, b = rand(4, 8, 16), rand(16, seed=1), rand(16, seed=2)
    for fn in (lambda t: lk.softmax(t, dim=-1), lambda t: F.log_softmax(t, dim=1),
               lambda t: F.layer_norm(t, (16,), w, b)):
        plain, dist = both(fn, x, placements=([[p]], mesh1d))
        close(dist, plain, 1e-11)


@pytest.mark.parametrize("pw,pi", [(Shard(0), Replicate()), (Shard(1), Replicate()),
                                   (Replicate(), Shard(0)), (Replicate(), Shard(1)),
                                   (Shard(0), Shard(0))], ids=str)
def test_embedding(mesh1d, pw, pi):
    w = rand(12, 8)
    idx = lk.tensor(np.random.default_rng(3).integers(0, 12, (4, 8)))
    d = F.embedding(distribute_tensor(idx, mesh1d, [pi]), distribute_tensor(w, mesh1d, [pw]))
    if pw == Shard(0):
        assert d.placements == (Partial(),)   # each device looks up its vocabulary rows
    close(d, F.embedding(idx, w))


@pytest.mark.parametrize("p", [Shard(0), Replicate()], ids=str)
def test_cross_entropy_over_a_split_batch(mesh1d, p):
    logits = rand(8, 10)
    target = lk.tensor([1, 2, -100, 4, 9, 0, -100, 3])        # ignored rows, as PyTorch's
    for kw in ({}, {"reduction": "sum"}, {"reduction": "none"},
               {"weight": rand(10, seed=5).abs()}):
        plain = F.cross_entropy(logits, target, **kw)
        dl = distribute_tensor(logits, mesh1d, [p])
        dt = distribute_tensor(target, mesh1d, [p])
        close(F.cross_entropy(dl, dt, **kw), plain)


@pytest.mark.parametrize("p", [Shard(0), Shard(1), Shard(2), Replicate()], ids=str)
def test_views(mesh1d, p):
    x = rand(4, 8, 16)
    for fn in (lambda t: t.view(4, 8, 4, 4).transpose(1, 2), lambda t: t.reshape(32, 16),
               lambda t: t.permute(2, 0, 1), lambda t: t[:, 2:5], lambda t: t[..., None],
               lambda t: t.split(8, dim=2)[1], lambda t: lk.cat([t, t], dim=1),
               lambda t: t.unsqueeze(0)):
        plain, dist = both(fn, x, placements=([[p]], mesh1d))
        close(dist, plain)


def test_heads_keep_their_split_through_views(mesh1d):
    x = distribute_tensor(rand(2, 6, 16), mesh1d, [Shard(2)])
    with CommDebugMode() as comm:
        heads = x.view(2, 6, 4, 4).transpose(1, 2)
        back = heads.transpose(1, 2).contiguous().view(2, 6, 16)
    assert heads.placements == (Shard(1),) and back.placements == (Shard(2),)
    assert comm.get_total_counts() == 0


def test_attention_with_split_heads(mesh1d):
    q, k, v = rand(2, 4, 6, 3), rand(2, 4, 6, 3, seed=1), rand(2, 4, 6, 3, seed=2)
    plain = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ds = [distribute_tensor(t, mesh1d, [Shard(1)]) for t in (q, k, v)]
    close(F.scaled_dot_product_attention(*ds, is_causal=True), plain)


def test_two_dimensional_mesh(mesh2d):
    x, w = rand(8, 6), rand(6, 4, seed=1)
    dx = distribute_tensor(x, mesh2d, [Shard(0), Replicate()])
    dw = distribute_tensor(w, mesh2d, [Replicate(), Shard(1)])
    y = lk.softmax(dx @ dw, dim=0)
    close(y, lk.softmax(x @ w, dim=0))


# ---- gradients -----------------------------------------------------------------------------------
def _loss(x, w, b):
    return (F.layer_norm(lk.tanh(x @ w) + b, (4,)) ** 2).mean()


@pytest.mark.parametrize("px,pw,pb", [(Shard(0), Replicate(), Replicate()),
                                      (Shard(1), Shard(0), Replicate()),
                                      (Replicate(), Shard(1), Shard(0)),
                                      (Replicate(), Replicate(), Partial())], ids=str)
def test_gradients_match_one_device(mesh1d, px, pw, pb):
    x, w, b = rand(8, 12), rand(12, 4, seed=1), rand(4, seed=2)
    leaves = [t.clone().requires_grad_() for t in (x, w, b)]
    _loss(*leaves).backward()
    ds = [distribute_tensor(t, mesh1d, [p]).requires_grad_() for t, p in zip((x, w, b),
                                                                             (px, pw, pb))]
    loss = _loss(*ds)
    loss.backward()
    for d, t, p in zip(ds, leaves, (px, pw, pb)):
        assert d.grad.placements == ((Replicate(),) if p == Partial() else (p,))
        close(d.grad, t.grad, 1e-12)


@pytest.mark.parametrize("px", [Shard(0), Shard(1), Replicate()], ids=str)
def test_layer_norm_with_weight_and_bias_gradients_match_one_device(mesh1d, px):
    x, w, b = rand(8, 4, 4), rand(4, seed=1), rand(4, seed=2)

    def loss(x, w, b):
        return (F.layer_norm(x, (4,), w, b) ** 2 * lk.arange(4.0, dtype=F64)).sum()
    leaves = [t.clone().requires_grad_() for t in (x, w, b)]
    loss(*leaves).backward()
    ds = [distribute_tensor(t, mesh1d, [p]).requires_grad_()
          for t, p in zip((x, w, b), (px, Replicate(), Replicate()))]
    loss(*ds).backward()
    for d, t in zip(ds, leaves):
        close(d.grad, t.grad, 1e-12)


def test_gradients_against_finite_differences(mesh2d):
    x, w = rand(4, 6), rand(6, 4, seed=1)
    dx = distribute_tensor(x, mesh2d, [Shard(0), Replicate()]).requires_grad_()
    dw = distribute_tensor(w, mesh2d, [Replicate(), Shard(1)]).requires_grad_()

    def f(xv, wv):
        return (lk.softmax(xv @ wv, dim=-1) * lk.arange(4.0, dtype=F64)).sum()

    f(dx, dw).backward()
    eps, numeric = 1e-6, np.zeros((6, 4))
    for i in range(6):
        for j in range(4):
            bump = np.zeros((6, 4))
            bump[i, j] = eps
            hi = f(x, w + lk.tensor(bump)).item()
            lo = f(x, w - lk.tensor(bump)).item()
            numeric[i, j] = (hi - lo) / (2 * eps)
    np.testing.assert_allclose(dw.grad.full_tensor().numpy(), numeric, rtol=1e-6, atol=1e-8)


def test_gradient_from_a_plain_tensor_adds_up_replicas(mesh1d):
    w = rand(6, 4)
    dw = distribute_tensor(w, mesh1d, [Replicate()]).requires_grad_()
    x = distribute_tensor(rand(8, 6, seed=1), mesh1d, [Shard(0)])
    (x @ dw).full_tensor().pow(2).sum().backward()
    ref = w.clone().requires_grad_()
    (rand(8, 6, seed=1) @ ref).pow(2).sum().backward()
    assert dw.grad.placements == (Replicate(),)
    for piece in dw.grad.local_tensors().values():
        np.testing.assert_allclose(piece.numpy(), ref.grad.numpy(), rtol=1e-12)


# ---- captured ------------------------------------------------------------------------------------
def test_captured_equals_eager_with_gradients(mesh2d):
    x, w, b = rand(8, 12), rand(12, 4, seed=1), rand(4, seed=2)
    dx = distribute_tensor(x, mesh2d, [Shard(0), Replicate()])
    dw = distribute_tensor(w, mesh2d, [Replicate(), Shard(1)]).requires_grad_()
    db = distribute_tensor(b, mesh2d, [Replicate(), Replicate()]).requires_grad_()

    def step(xv):
        dw.grad = db.grad = None
        loss = _loss(xv, dw, db)
        loss.backward()
        return loss

    eager = step(dx)
    ge, gb = dw.grad.full_tensor().numpy(), db.grad.full_tensor().numpy()
    f = lk.function(step)
    for _ in range(2):
        captured = f(dx)
        assert isinstance(captured, DTensor) and captured.placements == eager.placements
        close(captured, eager.full_tensor(), 1e-13)
        np.testing.assert_allclose(dw.grad.full_tensor().numpy(), ge, rtol=1e-13)
        np.testing.assert_allclose(db.grad.full_tensor().numpy(), gb, rtol=1e-13)
    assert len(f.traces) == 1
    assert len({n.device for n in f.graph(dx).nodes}) == 4


def test_a_new_layout_retraces_with_its_reason(mesh1d):
    f = lk.function(lambda t: t * 2)
    x = rand(8, 4)
    f(distribute_tensor(x, mesh1d, [Shard(0)]))
    out = f(distribute_tensor(x, mesh1d, [Shard(1)]))
    assert out.placements == (Shard(1),) and len(f.traces) == 2
    assert "DTensor" in f.traces[1].reason


# ---- messages --------------------------------------------------------------------------------------
@pytest.mark.parametrize("captured", [False, True], ids=["eager", "captured"])
def test_collectives_are_messages_with_ring_bytes(mesh1d, captured):
    x = distribute_tensor(rand(8, 16), mesh1d, [Shard(0)])
    p = distribute_tensor(rand(8, 16), mesh1d, [Partial()])

    def fn(x, p):
        return x.redistribute(placements=[Replicate()]), p.redistribute(placements=[Shard(0)]), \
            p.redistribute(placements=[Replicate()])
    run = lk.function(fn) if captured else fn
    run(x, p)                                   # traced once, outside the profile
    with lk.profile() as prof, CommDebugMode() as comm:
        outs = run(x, p)
    whole = 8 * 16 * 8            # bytes of the float64 tensor
    expect = {"all_gather": whole * 3 // 4, "reduce_scatter": whole * 3 // 4,
              "all_reduce": 2 * whole * 3 // 4}
    if not captured:
        assert comm.bytes_per_device() == expect
    sent = {}
    for e in prof.events:
        if e.op == "send":
            sent[e.device] = sent.get(e.device, 0) + e.bytes_in
    assert sent == {f"cpu:{i}": sum(expect.values()) for i in range(4)}
    from labkit.profiler.flows import arrows
    assert len(arrows(prof)) == sum(1 for e in prof.events if e.op == "recv") > 0
    for out in outs:
        assert out.shape == (8, 16)


# ---- wrong use -------------------------------------------------------------------------------------
def test_a_mesh_larger_than_the_devices(four_devices):
    with pytest.raises(DeviceError, match=r"needs 8 cpu devices.*configure\(cpus=8\)"):
        init_device_mesh("cpu", (2, 4))


def test_a_shard_that_does_not_divide(mesh1d):
    with pytest.raises(ShapeError, match=r"Shard\(0\).*size 6.*mesh dim x of size 4"):
        distribute_tensor(rand(6, 4), mesh1d, [Shard(0)])


def test_an_op_without_a_sharding_rule_names_itself_and_the_placements(mesh1d):
    d = distribute_tensor(rand(8, 4), mesh1d, [Shard(0)])
    with pytest.raises(ShapeError, match=r"pad has no sharding rule.*DTensor \[8, 4\] \(S\(0\)\)"):
        F.pad(d, (1, 1))


def test_two_meshes_do_not_mix(four_devices):
    a = distribute_tensor(rand(4, 4), init_device_mesh("cpu", (4,)), [Shard(0)])
    b = distribute_tensor(rand(4, 4), init_device_mesh("cpu", (2, 2)), [Shard(0), Replicate()])
    with pytest.raises(ValueError, match="two different meshes"):
        a + b


def test_moving_a_dtensor_to_a_device_says_what_to_do(mesh1d):
    d = distribute_tensor(rand(8, 4), mesh1d, [Shard(0)])
    with pytest.raises(DeviceError, match="full_tensor"):
        d.to("cpu:1")
    with pytest.raises(ValueError, match="to_local"):
        d.to_local()
