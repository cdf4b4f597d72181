"""State in the graph: lk.Variable, concurrent runs sharing it, partial execution, FIFOQueue
(blocking, closing, in graphs, feeding a captured training step from a producer thread), and
the Save/Restore ops."""
import threading
import time

import numpy as np
import pytest

import labkit as lk
from labkit import nn, optim
from labkit.nn import functional as F
from labkit.tensor.shape_rules import same_as_first


# ---- Variable ---------------------------------------------------------------------------------
def test_variable_owns_a_copy_and_updates_in_place():
    source = lk.tensor([1.0, 2.0])
    v = lk.Variable(source, name="v")
    buffer = v._data
    assert isinstance(v, lk.Tensor) and v.name == "v" and v.trainable and v.requires_grad
    v.assign_add(lk.ones(2))
    v.assign_sub(0.5)
    assert v.tolist() == [1.5, 2.5] and source.tolist() == [1.0, 2.0]
    v.assign(lk.tensor([7.0, 8.0]))
    assert v._data is buffer and v.tolist() == [7.0, 8.0]
    counter = lk.Variable(0)
    assert counter.dtype is lk.int64 and not counter.requires_grad     # ints never train
    frozen = lk.Variable(np.zeros(3, np.float32), trainable=False, device="cpu:0")
    assert not frozen.requires_grad and frozen.device.name == "cpu:0"
    assert "Variable 'v'" in repr(v)


def test_read_value_is_a_snapshot():
    v = lk.Variable([1.0, 2.0], name="v")
    flag = lk.Variable([True, False], name="flag")
    before, flag_before = v.read_value(), flag.read_value()
    v.assign(0.0)
    flag.assign(True)
    assert before.tolist() == [1.0, 2.0] and flag_before.tolist() == [True, False]
    assert flag_before.dtype is lk.bool_


def test_variable_is_trained_and_captured_by_reference():
    w = lk.Variable([1.0, -2.0], name="w")
    opt = optim.SGD([w], lr=0.25)

    @lk.function
    def step():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        opt.step()
        return loss

    assert step().item() == 5.0
    assert w.tolist() == [0.5, -1.0]                    # w - 0.25 * 2w
    w.assign(lk.tensor([2.0, 0.0]))                      # changed outside: the graph sees it
    assert step().item() == 4.0
    assert len(step.traces) == 1
    capture = [n for n in step.traces[0].graph.nodes if n.kind == "capture"]
    assert any(n.name == "w" for n in capture)          # shown by its name


def test_a_symbolic_initial_value_is_refused():
    @lk.function
    def f(x):
        return lk.Variable(x * 2)

    with pytest.raises(lk.TracingError, match="concrete initial value"):
        f(lk.ones(2))


# ---- concurrent runs share variables ----------------------------------------------------------
def test_concurrent_runs_of_one_graph_lose_no_update():
    v = lk.Variable(lk.zeros(16), name="total", trainable=False)
    with lk.Graph() as g:
        increment = v.assign_add(1.0)
    errors = []

    def worker():
        try:
            for _ in range(1000):
                g.run(increment)
        except Exception as exc:      # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert v.tolist() == [8000.0] * 16


def test_concurrent_calls_of_a_captured_function_lose_no_update():
    v = lk.Variable(0, name="count")

    @lk.function
    def tick(k):
        time.sleep(0.01)          # a slow trace: every thread arrives while it is traced
        return v.assign_add(k.sum())

    start = threading.Barrier(8)

    def worker():
        start.wait()
        for _ in range(250):
            tick(lk.tensor([1, 1]))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert v.item() == 8 * 250 * 2
    assert len(tick.traces) == 1                  # traced once, though called at once


# ---- partial execution ------------------------------------------------------------------------
def test_run_executes_only_what_the_fetches_need():
    ran = []
    probe = lk.op("state_test_probe", shape=same_as_first, stateful=True, register=False)(
        lambda xp, x: ran.append(x.copy()) or x)
    v = lk.Variable(0.0, name="v", trainable=False)
    with lk.Graph() as g:
        x = lk.placeholder((2,), lk.float32, name="x")
        y = x * 2.0
        bump = v.assign_add(1.0)              # a side effect in another branch
        z = probe(x) + 1.0                     # a side effect on the way to z
        unfed = lk.placeholder((3,), name="unfed")
        w = unfed * 3.0
    assert g.run(y, {x: [1.0, 2.0]}).tolist() == [2.0, 4.0]
    assert v.item() == 0.0 and ran == []       # neither side effect happened
    assert g.run(z, {x: [1.0, 2.0]}).tolist() == [2.0, 3.0]
    assert len(ran) == 1 and v.item() == 0.0
    g.run(bump)                                # needs no feed at all
    assert v.item() == 1.0 and len(ran) == 1
    assert g.run([y, bump], {x: [0.0, 1.0]})[0].tolist() == [0.0, 2.0] and v.item() == 2.0
    assert g.run(w, {unfed: [1.0, 1.0, 1.0]}).tolist() == [3.0] * 3


# ---- FIFOQueue ----------------------------------------------------------------------------------
def test_queue_is_first_in_first_out_with_components():
    q = lk.FIFOQueue(5, [lk.float32, lk.int64], [(2,), ()], name="pairs")
    for i in range(3):
        q.enqueue(lk.full((2,), float(i)), lk.tensor(i))
    q.enqueue([np.array([9.0, 9.0]), 9])                # a list, converted to the dtypes
    assert int(q.size()) == 4
    x, i = q.dequeue()
    assert x.tolist() == [0.0, 0.0] and i.item() == 0 and x.dtype is lk.float32
    xs, ids = q.dequeue_many(3)
    assert xs.shape == (3, 2) and ids.tolist() == [1, 2, 9]
    q.enqueue_many(lk.zeros(2, 2), lk.tensor([5, 6]))
    assert [int(q.dequeue()[1]) for _ in range(2)] == [5, 6]
    assert "pairs" in repr(q)


def test_closed_queue_drains_then_raises():
    q = lk.FIFOQueue(4, lk.float32, (), name="stream")
    q.enqueue_many(lk.tensor([1.0, 2.0, 3.0]))
    assert int(q.close()) == 3 and q.closed
    with pytest.raises(lk.QueueClosedError, match="'stream'.*closed"):
        q.enqueue(lk.tensor(4.0))
    assert q.dequeue().item() == 1.0                     # what was queued is still there
    with pytest.raises(lk.QueueClosedError, match="holds only 2 of the 3"):
        q.dequeue_many(3)
    assert q.dequeue_many(2).tolist() == [2.0, 3.0]
    with pytest.raises(lk.QueueClosedError, match="closed and empty"):
        q.dequeue()


def test_queue_blocks_until_room_or_data():
    q = lk.FIFOQueue(1, lk.int64, (), timeout=10)
    order = []

    def consumer():
        for _ in range(3):
            order.append(("got", q.dequeue().item()))

    t = threading.Thread(target=consumer)
    t.start()
    time.sleep(0.05)                # the consumer is now waiting on an empty queue
    for i in range(3):
        q.enqueue(lk.tensor(i))     # capacity 1: waits for the consumer each time
        order.append(("put", i))
    t.join(timeout=10)
    assert not t.is_alive()
    assert [v for what, v in order if what == "got"] == [0, 1, 2]
    assert int(q.size()) == 0


def test_close_wakes_a_waiting_consumer_and_cancels_pending_enqueues():
    q = lk.FIFOQueue(1, lk.float32, (), timeout=10)
    caught = []

    def consumer():
        try:
            q.dequeue()
        except lk.QueueClosedError as exc:
            caught.append(exc)

    t = threading.Thread(target=consumer)
    t.start()
    time.sleep(0.05)
    q.close()
    t.join(timeout=10)
    assert len(caught) == 1

    full = lk.FIFOQueue(1, lk.float32, (), timeout=10)
    full.enqueue(lk.tensor(1.0))
    t = threading.Thread(target=lambda: caught.append(pytest.raises(
        lk.QueueClosedError, full.enqueue, lk.tensor(2.0))))
    t.start()
    time.sleep(0.05)
    full.close(cancel_pending_enqueues=True)
    t.join(timeout=10)
    assert "cancelled" in str(caught[-1].value)


def test_queue_timeout_and_argument_errors():
    q = lk.FIFOQueue(2, [lk.float32, lk.int64], [(3,), ()], name="batches", timeout=0.01)
    with pytest.raises(lk.graph.QueueTimeoutError, match="'batches' waited"):
        q.dequeue()
    with pytest.raises(lk.ShapeError, match=r"'batches'.*component 0 must have shape \(3,\)"):
        q.enqueue(lk.zeros(4), lk.tensor(1))
    with pytest.raises(lk.DTypeError, match="component 1 must be int64"):
        q.enqueue(lk.zeros(3), lk.tensor(1.0))
    with pytest.raises(lk.ShapeError, match="different numbers of elements"):
        q.enqueue_many(lk.zeros(2, 3), lk.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="2 component"):
        q.enqueue(lk.zeros(3))
    with pytest.raises(ValueError, match="as many shapes"):
        lk.FIFOQueue(2, [lk.float32, lk.int64], (3,))


def test_queue_ops_in_an_explicit_graph():
    q = lk.FIFOQueue(10, lk.float32, (2,))
    with lk.Graph() as g:
        x = lk.placeholder((2,), lk.float32, name="x")
        put = q.enqueue(x * 10.0)
        take = q.dequeue()
        size = q.size()
    names = [n.op_name for n in g.nodes]
    assert "queue_enqueue" in names and "queue_dequeue" in names
    for i in range(3):
        g.run(put, {x: [i, i]})
    assert g.run(size).item() == 3
    assert g.run(take).tolist() == [0.0, 0.0]
    assert [g.run(take).tolist() for _ in range(2)] == [[10.0, 10.0], [20.0, 20.0]]


def test_a_producer_thread_feeds_a_captured_training_step():
    train_set, _ = lk.data.digits(test_fraction=0.2, seed=0)
    batches = [b for _, b in zip(range(8), lk.data.DataLoader(train_set, batch_size=16,
                                                              shuffle=True, seed=3))]

    def make():
        lk.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(1, 8, kernel_size=3, padding=1), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 4 * 4, 10))
        return model, optim.Adam(model.parameters(), lr=1e-2)

    eager_model, eager_opt = make()
    eager = []
    for images, labels in batches:
        eager_opt.zero_grad()
        loss = F.cross_entropy(eager_model(images), labels)
        loss.backward()
        eager_opt.step()
        eager.append(loss.item())

    # examples, one at a time, as an input pipeline would produce them
    q = lk.FIFOQueue(40, [lk.float32, lk.int64], [(1, 8, 8), ()], name="examples", timeout=30)

    def producer():
        for images, labels in batches:
            q.enqueue_many(images, labels)
        q.close()

    model, opt = make()

    @lk.function
    def step():
        images, labels = q.dequeue_many(16)
        opt.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        opt.step()
        return loss

    thread = threading.Thread(target=producer)
    thread.start()
    losses = []
    while True:
        try:
            losses.append(step().item())
        except lk.QueueClosedError:
            break
    thread.join(timeout=30)
    assert len(step.traces) == 1 and len(losses) == len(batches)
    np.testing.assert_allclose(losses, eager, rtol=0, atol=1e-5)
    for p, e in zip(model.parameters(), eager_model.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), e.detach().numpy(), rtol=1e-5, atol=1e-6)


# ---- Save / Restore ----------------------------------------------------------------------------
def test_save_and_restore_variables_eagerly(tmp_path):
    path = tmp_path / "vars.lk"
    w = lk.Variable(np.arange(6.0, dtype=np.float32).reshape(2, 3), name="w")
    step = lk.Variable(7, name="step")
    assert int(lk.save_variables([w, step], path)) == 2
    loaded = lk.load(path)
    assert sorted(loaded) == ["step", "w"] and loaded["step"].item() == 7
    buffer = w._data
    w.assign(0.0)
    step.assign(0)
    lk.restore_variables([w, step], path)
    assert w._data is buffer                            # restored in place
    np.testing.assert_array_equal(w.detach().numpy(), np.arange(6.0).reshape(2, 3))
    assert step.item() == 7
    # a dict names plain tensors too; lk.save's files restore as well
    t = lk.zeros(2, 3)
    lk.save({"weights": lk.ones(2, 3)}, tmp_path / "plain.lk")
    lk.restore_variables({"weights": t}, tmp_path / "plain.lk")
    assert t.tolist() == [[1.0] * 3] * 2


def test_save_and_restore_ops_in_a_graph(tmp_path):
    path = str(tmp_path / "ckpt.lk")
    w = lk.Variable([1.0, 2.0], name="w")
    with lk.Graph() as g:
        save = lk.save_variables([w], path)
        restore = lk.restore_variables([w], path)
        double = w.assign(w * 2.0)
    assert [n.op_name for n in g.nodes if n.kind == "op"][:2] == ["save_variables",
                                                                  "restore_variables"]
    g.run(save)
    g.run(double)
    g.run(double)
    assert w.tolist() == [4.0, 8.0]

    @lk.function
    def read():
        return w * 1.0

    assert read().tolist() == [4.0, 8.0]
    g.run(restore)
    assert w.tolist() == [1.0, 2.0] and read().tolist() == [1.0, 2.0]


def test_restore_errors_name_the_variable_and_change_nothing(tmp_path):
    path = tmp_path / "vars.lk"
    a, b = lk.Variable([1.0, 2.0], name="a"), lk.Variable([3.0], name="b")
    lk.save_variables([a, b], path)
    a.assign(0.0)
    wrong = lk.Variable([0.0, 0.0, 0.0], name="b")
    with pytest.raises(lk.ShapeError, match="'b' has shape \\(3,\\).*holds shape \\(1,\\)"):
        lk.restore_variables([a, wrong], path)
    assert a.tolist() == [0.0, 0.0]                     # nothing half-restored
    with pytest.raises(lk.DTypeError, match="'a' is float64"):
        lk.restore_variables([lk.Variable([0.0, 0.0], name="a", dtype="float64")], path)
    with pytest.raises(lk.CheckpointError, match="no value for the variable.*'c'"):
        lk.restore_variables([lk.Variable([0.0], name="c")], path)
    with pytest.raises(ValueError, match="several variables are named \\['a'\\]"):
        lk.save_variables([a, lk.Variable([1.0], name="a")], path)
    with pytest.raises(TypeError, match="has no name"):
        lk.save_variables([lk.zeros(2)], path)


class _CachesAMask(lk.nn.Module):
    """As word_language_model's TransformerModel: the mask is made in forward when the length
    changes, and kept on the module."""

    def __init__(self):
        super().__init__()
        self.lin = lk.nn.Linear(4, 4)
        self.mask = None

    def forward(self, x):
        if self.mask is None or self.mask.shape[0] != x.shape[0]:
            self.mask = lk.tril(lk.ones(x.shape[0], x.shape[0]))
        return self.mask @ self.lin(x)


@pytest.mark.parametrize("wrap", ["function", "compile"])
def test_a_tensor_a_module_keeps_in_its_forward_is_a_value_after_each_run(wrap):
    lk.manual_seed(0)
    model = _CachesAMask()
    step = lk.function(model) if wrap == "function" else lk.compile(model)
    x3, x5 = lk.randn(3, 4), lk.randn(5, 4)
    for x in (x3, x3, x5, x3):
        out = step(x)
        assert type(model.mask) is lk.Tensor and model.mask.shape == (x.shape[0],) * 2
        np.testing.assert_allclose(out.detach().numpy(), model(x).detach().numpy(), rtol=1e-6)
        np.testing.assert_array_equal(model.mask.numpy(), np.tril(np.ones((x.shape[0],) * 2)))


def test_a_trace_that_fails_puts_a_modules_attributes_back():
    model = _CachesAMask()

    @lk.function
    def broken(x):
        model(x)
        raise RuntimeError("fails after the module set its mask")

    with pytest.raises(RuntimeError, match="fails after"):
        broken(lk.randn(3, 4))
    assert model.mask is None and "mask" in model.__dict__
    model.extra = 1.0

    @lk.function
    def adds(x):
        model.fresh = x * 2
        raise RuntimeError("fails")

    with pytest.raises(RuntimeError):
        adds(lk.randn(2))
    assert not hasattr(model, "fresh")
