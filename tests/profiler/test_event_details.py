"""What a profiler event carries for the timeline explorer's details panel: with
``record_shapes=True`` its inputs' and outputs' dtypes and shapes, with ``with_stack=True`` the
user's line that ran it (eager ops and captured graph nodes alike); neither by default."""
import inspect

import numpy as np

import labkit as lk
from labkit.profiler.events import shapes_text
from labkit.viz.timeline import event_details
from labkit.viz.timeline_data import decode_column, timeline_payload


def _type(t):
    return f"{t.dtype.name}{list(t.shape)}"


def _line_here():
    return inspect.currentframe().f_back.f_lineno


def test_eager_events_carry_shapes_against_the_tensors_and_this_files_line():
    x = lk.tensor(np.ones((5, 3), np.float32))
    w = lk.tensor(np.ones((3, 2), np.float64))
    with lk.profile(record_shapes=True, with_stack=True) as prof:
        y = x.to(dtype=lk.float64) @ w; line = _line_here()                   # noqa: E702
    matmul = next(e for e in prof.events if e.op == "matmul")
    assert matmul.shape == f"float64[5, 3], {_type(w)} -> {_type(y)}"
    assert matmul.shape == "float64[5, 3], float64[3, 2] -> float64[5, 2]"
    assert matmul.line.startswith(f"{__file__}:{line}: ")
    assert "x.to(dtype=lk.float64) @ w" in matmul.line
    # bytes agree with the shapes
    assert matmul.bytes_in == (5 * 3 + 3 * 2) * 8 and matmul.bytes_out == 5 * 2 * 8


def test_a_layers_ops_point_at_the_users_call_not_at_labkit():
    model = lk.nn.Linear(4, 2)
    x = lk.ones(6, 4)
    with lk.profile(with_stack=True) as prof:
        model(x); line = _line_here()                                          # noqa: E702
    assert prof.events and all(e.line.startswith(f"{__file__}:{line}: ") for e in prof.events)
    assert all(e.shape is None for e in prof.events)          # record_shapes was not asked


def test_by_default_events_carry_neither_shapes_nor_line():
    with lk.profile() as prof:
        (lk.ones(2, 2) + 1.0).sum()
    assert prof.events and all(e.shape is None and e.line is None for e in prof.events)
    assert all(d["shape"] is None and d["line"] is None for d in
               (e.as_dict() for e in prof.events))


def test_captured_graph_nodes_carry_their_traced_shapes_and_line():
    @lk.function
    def f(x, w):
        h = (x @ w).relu(); line = _line_here()                                 # noqa: E702
        f.line = line
        return h.sum()

    x, w = lk.ones(8, 3), lk.ones(3, 4)
    f(x, w)
    with lk.profile(record_shapes=True, with_stack=True) as prof:
        f(x, w)
    by_op = {e.op: e for e in prof.events}
    assert by_op["matmul"].source != "eager"
    assert by_op["matmul"].shape == "float32[8, 3], float32[3, 4] -> float32[8, 4]"
    assert by_op["relu"].shape == "float32[8, 4] -> float32[8, 4]"
    assert by_op["sum"].shape == "float32[8, 4] -> float32[]"
    assert by_op["matmul"].line.startswith(f"{__file__}:{f.line}: ")
    with lk.profile() as plain:
        f(x, w)
    assert plain.events and all(e.shape is None and e.line is None for e in plain.events)


def test_the_explorer_payload_and_the_svg_tooltip_show_them():
    with lk.profile(record_shapes=True, with_stack=True) as prof:
        lk.ones(4, 4).exp(); line = _line_here()                                # noqa: E702
        lk.ones(2).exp()
    payload, events = timeline_payload(prof)
    shapes = [payload["strings"]["shape"][i] for i in decode_column(payload, "shape")]
    lines = [payload["strings"]["line"][i] for i in decode_column(payload, "line")]
    assert shapes == ["float32[4, 4] -> float32[4, 4]", "float32[2] -> float32[2]"]
    assert lines[0].startswith(f"{__file__}:{line}: ") and lines[1] != lines[0]
    tip = event_details(events[0])
    assert "float32[4, 4] -> float32[4, 4]" in tip and f":{line}: " in tip
    plain_payload, _ = timeline_payload(lk.profiler.Profile())
    assert "shape" not in plain_payload["columns"]


def test_shapes_text_takes_numpy_and_labkit_dtypes():
    assert shapes_text([((2, 3), np.dtype("int64"))], [((), lk.float32)]) == \
        "int64[2, 3] -> float32[]"
