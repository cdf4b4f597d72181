"""Parameter servers over MPI buffers: dense parameters spread over the servers by bytes, the
packet layout both ends agree on, and synchronous training on 2 servers and 2 workers equal to
one process averaging the two workers' gradients step by step."""
import numpy as np
import pytest

import labkit as lk
from labkit import nn
from labkit.dist.packets import Packing, get_float, put_float
from labkit.dist.parameter_server import Layout, _batches


def test_dense_parameters_are_balanced_by_bytes():
    model = nn.Sequential(nn.Linear(64, 32), nn.Linear(32, 32), nn.Linear(32, 10),
                          nn.Linear(10, 200))
    layout = Layout(model, num_ps=2)
    sizes = {name: p.detach().numpy().nbytes for name, p in model.named_parameters()}
    assert list(layout.dense) == list(sizes)                 # the model's order
    load = [sum(sizes[n] for n in layout.dense_of(s)) for s in range(2)]
    assert load == layout.load
    # the largest goes alone to one server, the rest fill the other up to it
    assert layout.dense["0.weight"] != layout.dense["1.weight"]
    assert abs(load[0] - load[1]) <= max(sizes.values()) // 2


def test_a_packing_lays_arrays_out_aligned_behind_its_header():
    packing = Packing([("a", (3,), "float32"), ("b", (2, 2), "float64"), ("c", (0,), "int64")],
                      header=5)
    buf = packing.empty()
    views = packing.views(buf)
    assert all(views[n].ctypes.data % 64 == 0 for n in "ab")
    assert all(np.shares_memory(views[n], buf) for n in "ab")
    views["b"][...] = [[1, 2], [3, 4]]
    head = packing.header(buf)
    head[0] = 9
    put_float(head, 1, -2.5)
    received = np.frombuffer(buf.tobytes(), np.uint8)
    assert packing.views(received)["b"].tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert packing.header(received)[0] == 9 and get_float(packing.header(received), 1) == -2.5
    assert packing.views(received)["c"].shape == (0,)


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10))


def sgd(params):
    return lk.optim.SGD(params, lr=0.2, momentum=0.5)


def reference(dataset, steps, batch_size, workers, seed=0):
    """One process: each step, the mean of each worker's gradient on its own batch stream."""
    lk.manual_seed(seed)
    model = mlp()
    opt = sgd(list(model.parameters()))
    streams = [_batches(dataset, batch_size, seed + 1 + k) for k in range(workers)]
    for _ in range(steps):
        loss = 0
        for stream in streams:
            x, y = next(stream)
            loss = loss + lk.nn.functional.cross_entropy(model(x), y) / workers
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {n: p.detach().numpy() for n, p in model.named_parameters()}


@pytest.mark.dist
def test_sync_training_on_two_servers_matches_one_process():
    train_set, _ = lk.data.digits(test_fraction=0.2, seed=0)
    steps, batch_size = 12, 16
    ps = lk.dist.ParameterServer(mlp, sgd, num_ps=2, mode="sync")
    result = ps.run(train_set, steps=steps, batch_size=batch_size, n=4)   # 2 servers, 2 workers
    assert result.steps == [steps, steps]
    assert result.accepted == {2: steps, 3: steps} and result.dropped == {2: 0, 3: 0}
    want = reference(train_set, steps, batch_size, workers=2)
    got = dict(result.model.named_parameters())
    for name, value in want.items():
        np.testing.assert_allclose(got[name].detach().numpy(), value, rtol=0, atol=1e-5)
    assert not np.allclose(want["1.weight"], mlp().state_dict()["1.weight"].numpy())
