"""lk.dist without worker processes: the world of one, argument errors, output sinks, the
buffer pool, error text, and what gets pickled by value. Runs anywhere (no ``dist`` marker)."""
import gc
import io
import pickle
import threading

import numpy as np
import pytest

import labkit as lk
from labkit.dist import buffers, worker
from labkit.dist.output import TextOutput, make_output


def test_world_of_one_outside_workers():
    assert (lk.dist.rank(), lk.dist.world_size(), lk.dist.local_rank()) == (0, 1, 0)
    assert not lk.dist.is_initialized()
    assert lk.dist.device() is lk.devices.get_device("cpu:0")
    x = lk.tensor([[1.0, -2.0], [3.0, 4.0]])
    for op in ("sum", "mean", "max", "min"):
        out = lk.dist.allreduce(x, op=op)
        assert out.tolist() == x.tolist() and out is not x
    assert lk.dist.broadcast(x).tolist() == x.tolist()
    assert lk.dist.allgather(x).shape == (1, 2, 2)
    assert lk.dist.reduce_scatter(x).tolist() == x.tolist()
    lk.dist.barrier()


def test_collectives_return_new_tensors_without_history():
    x = lk.tensor([1.0, 2.0], requires_grad=True)
    out = lk.dist.allreduce(x * 2)
    assert not out.requires_grad and out.tolist() == [2.0, 4.0]


def test_collective_argument_errors():
    with pytest.raises(ValueError, match="unknown op 'avg'; use one of sum, mean, max, min, prod"):
        lk.dist.allreduce(lk.ones(2), op="avg")
    assert lk.dist.allreduce(lk.tensor([2.0, 3.0]), op="prod").tolist() == [2.0, 3.0]
    with pytest.raises(lk.DTypeError, match="cast it to float"):
        lk.dist.allreduce(lk.tensor([1, 2]), op="mean")
    with pytest.raises(lk.DTypeError, match="bool tensor"):
        lk.dist.allreduce(lk.tensor([True, False]), op="sum")
    with pytest.raises(TypeError, match="takes a labkit Tensor"):
        lk.dist.allreduce(np.ones(2))
    with pytest.raises(ValueError, match="src=1 is not a rank"):
        lk.dist.broadcast(lk.ones(2), src=1)
    with pytest.raises(lk.dist.DistError, match="divide by the world size"):
        lk.dist.reduce_scatter(lk.ones(()))


def test_cluster_arguments_are_checked_before_starting_anything():
    with pytest.raises(lk.dist.DistError, match="positive number of workers"):
        lk.dist.Cluster(n=0)
    with pytest.raises(lk.dist.DistError, match="backend='gloo' is not one of"):
        lk.dist.Cluster(n=2, backend="gloo")
    with pytest.raises(lk.dist.DistError, match="cannot find a route to host node7.example"):
        lk.dist.launch(print, hosts=["node7.example", "node8.example"])
    with pytest.raises(ValueError, match="output='fancy'"):
        lk.dist.Cluster(n=2, output="fancy")


def test_data_parallel_in_one_process_is_plain_training():
    lk.manual_seed(0)
    plain = lk.nn.Linear(3, 2)
    wrapped = lk.dist.DataParallel(lk.nn.Linear(3, 2))
    wrapped.module.load_state_dict(plain.state_dict())
    x = lk.randn(4, 3)
    for model in (plain, wrapped):
        opt = lk.optim.SGD(model.parameters(), lr=0.1)
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        if model is wrapped:
            model.sync_gradients()
        opt.step()
    assert np.array_equal(plain.weight.numpy(), wrapped.module.weight.numpy())
    assert list(wrapped.state_dict()) == ["module.weight", "module.bias"]
    with pytest.raises(TypeError, match="wraps an lk.nn.Module"):
        lk.dist.DataParallel(lambda x: x)


def test_text_output_prefixes_complete_lines_by_rank():
    out, err = io.StringIO(), io.StringIO()
    sink = TextOutput(2, stdout=out, stderr=err)
    sink.write(0, "stdout", "loss 1.0\nloss 0.")
    sink.write(1, "stderr", "warning\n")
    sink.write(0, "stdout", "5\n")
    sink.write(1, "stdout", "no newline")
    sink.close()
    assert out.getvalue() == "[rank 0] loss 1.0\n[rank 0] loss 0.5\n[rank 1] no newline\n"
    assert err.getvalue() == "[rank 1] warning\n"


def test_output_modes():
    assert type(make_output(2, "auto")).__name__ == "TextOutput"     # not in a notebook here
    make_output(2, "none").write(0, "stdout", "dropped")
    with pytest.raises(ValueError, match="not one of"):
        make_output(2, "html")


def test_widget_output_has_a_tab_per_rank():
    pytest.importorskip("ipywidgets")
    sink = make_output(2, "widget")
    sink.write(1, "stdout", "hello\n")
    sink.write(1, "stdout", "again\n")
    sink.write(1, "stderr", "oops\n")
    sink.close()
    assert len(sink.tab.children) == 2
    assert [(o["name"], o["text"]) for o in sink.outputs[1].outputs] == [
        ("stdout", "hello\nagain\n"), ("stderr", "oops\n")]
    assert sink.outputs[0].outputs == ()


def test_buffer_pool_recycles_only_when_every_view_is_gone():
    a = buffers.empty((512, 1024), "float32")
    address = a.ctypes.data
    view = a[3:].reshape(-1)          # numpy views of views: the pooled memory must stay theirs
    del a
    gc.collect()
    b = buffers.empty((512, 1024), "float32")
    assert b.ctypes.data != address
    del view, b
    gc.collect()
    c = buffers.empty((2 ** 20,), "uint8")
    assert c.ctypes.data == address or buffers.cached_bytes() > 0
    small = buffers.empty((3,), "float64")
    assert small.shape == (3,) and small.base is None


def test_worker_error_text_and_pickling():
    e = lk.dist.WorkerError(1, 2, "ValueError", "bad", "Traceback:\n  ...\nValueError: bad",
                            failed_ranks=[1, 0], note="The other workers were stopped.")
    text = str(e)
    assert text.startswith("worker rank 1 (of 2) raised ValueError: bad")
    assert "Traceback on rank 1:" in text and "Ranks 0 failed too" in text
    assert text.endswith("The other workers were stopped.")
    again = pickle.loads(pickle.dumps(e))
    assert (again.rank, again.remote_type, str(again)) == (1, "ValueError", text)
    assert isinstance(e, lk.LabkitError)


def _local_function():
    return 1


def test_functions_of_uninstalled_modules_travel_by_value():
    assert worker._by_value(__name__)                   # this test file: not importable there
    assert not worker._by_value("labkit.nn.module")     # labkit: imported by the workers
    assert not worker._by_value("json")                 # the standard library
    assert not worker._by_value("numpy")                # site-packages
    assert not worker._by_value("__main__")             # cloudpickle does it already
    payload = worker.dumps_call(_local_function, (lk.ones(2),))
    assert b"_local_function" in payload
    with pytest.raises(lk.dist.DistError, match="could not send"):
        worker.dumps_call(_local_function, (threading.Lock(),))
