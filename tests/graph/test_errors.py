"""Errors of graph use say what went wrong and name the node: retraces explain themselves, and
unfed placeholders, fetches from another graph, feeds of the wrong shape or dtype, feeding a
node that is not a placeholder, and tracing mistakes are clear errors."""
import numpy as np
import pytest

import labkit as lk


def test_a_new_shape_retraces_and_says_why():
    @lk.function
    def f(x, scale):
        return x * scale

    f(lk.ones(4, 3), 2.0)
    f(lk.ones(4, 3), 2.0)                           # same signature: no new trace
    assert len(f.traces) == 1 and f.traces[0].reason == "first call"
    out = f(lk.ones(2, 3), 2.0)
    assert out.shape == (2, 3) and len(f.traces) == 2
    assert f.traces[1].reason == "x: shape (4, 3) -> (2, 3)"
    f(lk.ones(2, 3, dtype="float64"), 2.0)
    assert f.traces[2].reason == "x: dtype float32 -> float64"
    f(lk.ones(2, 3, dtype="float64"), 3.0)
    assert f.traces[3].reason == "scale: Python value 2.0 -> Python value 3.0"
    text = f.explain_traces()
    assert "trace 2: x: shape (4, 3) -> (2, 3)" in text and "trace 4: scale" in text
    assert f(lk.ones(4, 3), 2.0).shape == (4, 3) and len(f.traces) == 4   # cached traces reused


def test_frequent_retracing_warns_naming_the_reason():
    @lk.function
    def g(x):
        return x + 1

    limit = lk.config._state["retrace_warning"]
    with pytest.warns(UserWarning, match="traced .* times.*x: shape"):
        for n in range(1, limit + 1):
            g(lk.ones(n))


@pytest.fixture
def graph():
    with lk.Graph(name="model") as g:
        x = lk.placeholder((2, 3), lk.float32, name="x")
        y = (x * 2.0).sum()
    return g, x, y


def test_an_unfed_placeholder_is_named(graph):
    g, x, y = graph
    with pytest.raises(lk.GraphError, match=r"placeholder 'x' \(float32\[2, 3\]\) must be fed"):
        g.run(y)
    with g:
        twice = x * 2.0
    with pytest.raises(lk.GraphError, match="placeholder 'x'"):
        g.run([twice], {})


def test_an_op_on_a_graph_tensor_outside_its_graph_names_the_graph(graph):
    g, x, y = graph
    with pytest.raises(lk.LabkitError, match="graph 'model'"):
        x * 1.0


def test_a_fetch_from_another_graph_names_both_graphs(graph):
    g, x, y = graph
    with lk.Graph(name="other") as other:
        z = lk.placeholder((2,), name="z") + 1.0
    with pytest.raises(lk.GraphError, match=r"'add'.*belongs to graph 'other', not to 'model'"):
        g.run(z, {x: np.ones((2, 3), np.float32)})
    with pytest.raises(lk.GraphError, match="belongs to graph 'model'"):
        other.run(z, {x: np.ones((2, 3), np.float32)})          # a feed of the other graph


def test_a_feed_of_the_wrong_shape_or_dtype_names_the_placeholder(graph):
    g, x, y = graph
    with pytest.raises(lk.GraphError, match=r"placeholder 'x': expected shape \(2, 3\), got "
                                            r"\(3, 2\)"):
        g.run(y, {x: np.ones((3, 2), np.float32)})
    with pytest.raises(lk.DTypeError, match="placeholder 'x': expected float32, got an array of "
                                            "float64"):
        g.run(y, {x: np.ones((2, 3), np.float64)})
    with pytest.raises(lk.DTypeError, match="placeholder 'x': expected float32.*int64"):
        g.run(y, {x: lk.ones(2, 3, dtype="int64")})
    assert g.run(y, {"x": [[1.0] * 3] * 2}).item() == 12.0     # by name; lists are converted


def test_feeding_a_node_that_is_not_a_placeholder(graph):
    g, x, y = graph
    with pytest.raises(lk.GraphError, match="'sum' is a sum, not a placeholder"):
        g.run(y, {y: 1.0})
    with pytest.raises(lk.GraphError, match="no node named 'nope'"):
        g.run(y, {"nope": 1.0})


def test_tracing_mistakes_name_the_node():
    @lk.function
    def branchy(x):
        if (x > 0).all():            # Python control flow on a symbolic value
            return x
        return -x

    with pytest.raises(lk.TracingError, match=r"Python control flow.*node %\d+ '\w+'.*lk.cond"):
        branchy(lk.ones(2))

    @lk.function
    def to_numpy(x):
        return np.asarray(x)

    with pytest.raises(lk.TracingError, match="NumPy.*symbolic.*node %0 'x'"):
        to_numpy(lk.ones(2))


def test_a_symbolic_tensor_cannot_leave_its_graph():
    leaked = []

    @lk.function
    def keep(x):
        leaked.append(x * 2.0)
        return x

    keep(lk.ones(2))

    @lk.function
    def use(y):
        return y + leaked[0]

    with pytest.raises(lk.GraphError, match=r"mul.*belongs to graph 'keep#1'.*cannot leave"):
        use(lk.ones(2))
