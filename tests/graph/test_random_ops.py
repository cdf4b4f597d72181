"""Random draws under capture: every call of a captured function draws new numbers, the same
ones eager code draws from the same seed (ops/random.py: stateful ops reading a generator)."""
import numpy as np
import pytest

import labkit as lk
import labkit.nn.functional as F
from tests.graph.test_training_step import train

DRAWS = {
    "rand": lambda x: lk.rand(2, 3) + x,
    "randn": lambda x: lk.randn(2, 3, dtype=lk.float64) * x,
    "randint": lambda x: lk.randint(0, 100, (2, 3)) + x.long(),
    "randperm": lambda x: lk.randperm(6).reshape(2, 3) + x.long(),
    "normal": lambda x: lk.normal(x, 2.0),
    "normal_numbers": lambda x: lk.normal(1.0, 0.5, (2, 3)) + x,
    "bernoulli": lambda x: lk.bernoulli(x * 0.5),
    "bernoulli_p": lambda x: lk.bernoulli(x, p=0.3),
    "dropout": lambda x: F.dropout(x, 0.5),
    "dropout2d": lambda x: F.dropout2d(x.reshape(1, 2, 3, 1), 0.5),
    "alpha_dropout": lambda x: F.alpha_dropout(x, 0.2, training=True),
    "two_draws": lambda x: lk.rand(3) * lk.randn(3) + x[0],
    "multinomial": lambda x: lk.multinomial(x + lk.arange(3.0), 2) + x[:, :2].long(),
    "multinomial_replacement": lambda x: lk.multinomial(x[0] * lk.arange(3.0), 5, True),
}


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_captured_draws_are_the_eager_stream(name):
    fn = DRAWS[name]
    x = lk.ones(2, 3)
    lk.manual_seed(7)
    eager = [fn(x).numpy() for _ in range(3)]
    captured = lk.function(fn)
    lk.manual_seed(7)
    got = [captured(x).numpy() for _ in range(3)]
    for a, b in zip(eager, got):
        np.testing.assert_array_equal(b, a)
    assert len(captured.traces) == 1
    assert not all(np.array_equal(got[0], g) for g in got[1:]), "every call must draw anew"


def test_dropout_module_is_not_frozen_by_capture():
    d = lk.nn.Dropout(0.5)
    d.train()
    f = lk.function(lambda x: d(x))
    assert not np.array_equal(f(lk.ones(4, 8)).numpy(), f(lk.ones(4, 8)).numpy())
    d.eval()
    np.testing.assert_array_equal(d(lk.ones(4, 8)).numpy(), np.ones((4, 8), np.float32))


def test_manual_seed_reseeds_functions_captured_before():
    f = lk.function(lambda: lk.rand(4))
    f()
    lk.manual_seed(3)
    first = f().numpy()
    lk.manual_seed(3)
    np.testing.assert_array_equal(f().numpy(), first)
    lk.manual_seed(3)
    np.testing.assert_array_equal(lk.rand(4).numpy(), first)


def test_a_generator_of_its_own_is_read_by_the_graph_and_leaves_the_default_alone():
    g = lk.Generator().manual_seed(11)
    f = lk.function(lambda: lk.randn(3, generator=g))
    lk.manual_seed(0)
    got = [f().numpy() for _ in range(2)]
    default_next = lk.rand(2).numpy()
    g.manual_seed(11)
    np.testing.assert_array_equal(got[0], lk.randn(3, generator=g).numpy())
    np.testing.assert_array_equal(got[1], lk.randn(3, generator=g).numpy())
    lk.manual_seed(0)
    np.testing.assert_array_equal(lk.rand(2).numpy(), default_next)


def test_rng_state_returns_the_stream_to_a_position():
    lk.manual_seed(5)
    state = lk.get_rng_state()
    a = lk.randn(3).numpy()
    lk.set_rng_state(state)
    np.testing.assert_array_equal(lk.randn(3).numpy(), a)
    assert lk.initial_seed() == 5 and lk.default_generator.initial_seed() == 5


def test_the_random_nodes_are_in_the_graph():
    f = lk.function(lambda x: F.dropout(x, 0.25) + lk.randn(3))
    f(lk.ones(3))
    ops = [n.op_name for n in f.traces[0].graph.nodes if n.kind == "op"]
    assert "uniform" in ops and "normal" in ops


def test_draws_take_the_role_of_their_pass_not_update():
    # a dropout mask is drawn in the forward pass: the picture colours it forward, while the
    # optimiser's assignments stay the update
    model = lk.nn.Sequential(lk.nn.Linear(4, 3), lk.nn.Dropout(0.5))
    opt = lk.optim.SGD(model.parameters(), lr=0.1)

    @lk.function
    def step(x):
        opt.zero_grad()
        loss = (model(x) + lk.randn(3)).sum()
        loss.backward()
        opt.step()
        return loss
    graph = step.graph(lk.ones(2, 4), passes=[])
    roles = {n.op_name: n.role for n in graph.nodes if n.kind == "op"}
    assert roles["uniform"] == "forward" and roles["normal"] == "forward"
    assert any(n.role == "update" for n in graph.nodes if n.kind == "op" and n.stateful
               and n.op_name.startswith("assign"))


def test_a_captured_training_step_with_dropout_is_bitwise_the_eager_run():
    # 20 SGD steps of a CNN with dropout on the digits: the same losses from the same seed
    train_set, _ = lk.data.digits()
    images, labels = (t.numpy() for t in train_set.tensors)
    batches = [(lk.tensor(images[i:i + 32]), lk.tensor(labels[i:i + 32]))
               for i in range(0, 640, 32)]

    def run(capture):
        losses, *_ = train(batches, capture, seed=0,
                           make_model=lambda: lk.nn.Sequential(
                               lk.nn.Conv2d(1, 4, 3, padding=1), lk.nn.ReLU(),
                               lk.nn.MaxPool2d(2), lk.nn.Dropout2d(0.2), lk.nn.Flatten(),
                               lk.nn.Dropout(0.3), lk.nn.Linear(64, 10)),
                           make_opt=lambda ps: lk.optim.SGD(ps, lr=0.05))
        return losses
    eager, captured = run(False), run(True)
    assert eager == captured
    assert eager[-1] < eager[0]


def test_random_arguments_are_checked():
    with pytest.raises(TypeError, match="generator= takes an lk.Generator"):
        lk.rand(2, generator=3)
    with pytest.raises(lk.ShapeError, match="probabilities must lie in"):
        lk.bernoulli(lk.tensor([1.5]))
    with pytest.raises(lk.ShapeError, match="low=3 must be less than high=3"):
        lk.randint(3, 3, (2,))
    with pytest.raises(lk.DTypeError, match="rand: draws floating-point"):
        lk.rand(2, dtype=lk.int64)


def test_draws_on_the_gpu_are_the_cpu_numbers(device):
    lk.manual_seed(2)
    cpu = lk.randn(5).numpy()
    f = lk.function(lambda: lk.randn(5, device=device))
    lk.manual_seed(2)
    out = f()
    assert out.device.type == lk.device(device).type
    np.testing.assert_array_equal(out.numpy(), cpu)


def test_a_captured_module_follows_train_and_eval():
    # the trace keeps each module's mode: eval() after capture must not keep dropping units
    model = lk.nn.Sequential(lk.nn.Linear(3, 3), lk.nn.Dropout(0.9))
    f = lk.function(model)
    x = lk.ones(2, 3)
    f(x)
    model.eval()
    np.testing.assert_array_equal(f(x).detach().numpy(), model(x).detach().numpy())
    assert len(f.traces) == 2
    assert "3 modules (Sequential, Linear, Dropout) are in eval mode, traced in train mode" in \
        f.traces[-1].reason
    model.train()
    f(x)
    model.eval()
    f(x)
    assert len(f.traces) == 2          # each mode's trace is kept and found again
    model.train()
    lk.manual_seed(4)
    eager = model(x).detach().numpy()
    lk.manual_seed(4)
    np.testing.assert_array_equal(f(x).numpy(), eager)
