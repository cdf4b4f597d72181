"""lk.viz.gradients: per-parameter norms and histograms match NumPy, NaN/Inf are flagged and
drawn red; gradient flow on a captured graph."""
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import labkit as lk
from labkit.viz.gradients import BINS, NONFINITE

SVG = "{http://www.w3.org/2000/svg}"


def _model_and_data():
    lk.manual_seed(0)
    model = lk.nn.Sequential(lk.nn.Linear(4, 8), lk.nn.ReLU(), lk.nn.Linear(8, 3))
    rng = np.random.default_rng(0)
    x = lk.tensor(rng.standard_normal((16, 4)).astype(np.float32))
    y = lk.tensor(rng.integers(0, 3, 16))
    return model, x, y


def test_monitor_records_norms_and_histograms_matching_numpy():
    model, x, y = _model_and_data()
    opt = lk.optim.SGD(model.parameters(), lr=0.1)
    mon = lk.viz.gradients(model)
    expected = {n: [] for n, _ in model.named_parameters()}
    for _ in range(3):
        opt.zero_grad()
        lk.nn.functional.cross_entropy(model(x), y).backward()
        mon.record()
        for name, p in model.named_parameters():
            expected[name].append(p.grad.numpy().astype(np.float64))
        opt.step()
    assert mon.steps == [0, 1, 2]
    assert mon.names == ["0.weight", "0.bias", "2.weight", "2.bias"]
    for name, grads in expected.items():
        np.testing.assert_allclose(mon.norms[name], [np.linalg.norm(g) for g in grads],
                                   rtol=1e-12)
        g = np.abs(grads[-1].ravel())
        last = np.log10(np.maximum(g[g > 0], 1e-12))        # zeros are counted apart
        np.testing.assert_array_equal(mon.hist[name][-1], np.histogram(last, BINS)[0])
        assert mon.zeros[name][-1] == int((g == 0).sum())
    assert mon.flags() == [] and not mon.has_nonfinite()
    assert "0.weight" in mon.summary()
    root = ET.fromstring(mon.svg())
    assert len(root.findall(f".//{SVG}polyline")) == 4           # one norm line per parameter
    # the histograms' ticks are whole powers of ten, their shades have a scale, and exact
    # zeros (a dead ReLU's) are a row of their own, not a band at the lowest bin
    ticks = [t.text for t in root.iter(f"{SVG}text") if t.text and t.text.startswith("1e")]
    assert ticks and all(re.fullmatch(r"1e-?\d+", t) for t in ticks), ticks
    assert root.find(f".//{SVG}g[@class='lk-shade-scale']") is not None
    assert any(mon.zeros[n][-1] for n in mon.names) == ("= 0" in mon.svg())


def test_nan_and_inf_are_flagged_and_drawn_red():
    w = lk.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    b = lk.tensor(np.ones(3, np.float32), requires_grad=True)
    mon = lk.viz.gradients({"w": w, "b": b})
    (w * 2.0).sum().backward()
    mon.record()
    g = np.full((2, 3), 2.0, np.float32)
    g[0, 1], g[1, 2] = np.nan, np.inf
    w.grad = lk.tensor(g)
    mon.record(step=7)
    assert mon.steps == [0, 7]
    assert mon.nan["w"] == [0, 1] and mon.inf["w"] == [0, 1]
    assert np.isnan(mon.norms["b"]).all()                       # b never had a gradient
    assert mon.flags() == ["step 7: w gradient has 1 NaN and 1 Inf"]
    assert mon.has_nonfinite("w") and not mon.has_nonfinite("b")
    svg = mon.svg()
    root = ET.fromstring(svg)
    marks = [g for g in root.iter(SVG + "g") if g.get("class") == "lk-nonfinite"]
    assert len(marks) == 1 and "1 NaN, 1 Inf" in marks[0].find(SVG + "title").text
    assert f'stroke="{NONFINITE}"' in svg


def test_vanishing_and_exploding_are_flagged():
    p = lk.tensor(np.ones(4, np.float32), requires_grad=True)
    mon = lk.viz.gradients([p])
    for scale in (1e-9, 1.0, 1e5):
        p.grad = lk.tensor(np.full(4, scale, np.float32))
        mon.record()
    flags = mon.flags()
    assert len(flags) == 2 and "vanishing" in flags[0] and "exploding" in flags[1]


def _train_step(model):
    params = list(model.parameters())

    @lk.function
    def train_step(x, y):
        loss = lk.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        for p in params:
            p.assign_sub(p.grad * 0.1)
        return loss
    return train_step


def test_gradient_flow_colours_gradient_edges_by_norm_without_updating():
    model, x, y = _model_and_data()
    before = [p.detach().numpy().copy() for p in model.parameters()]
    step = _train_step(model)
    pic = lk.viz.gradient_flow(step, x, y)
    for p, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.detach().numpy(), b)              # no update was run
    assert pic.norms and all(np.isfinite(v) for v in pic.norms.values())
    assert "gradient norm" in pic.dot and "penwidth=" in pic.dot
    # the weight gradient of the last layer: its norm matches an eager backward
    model.zero_grad()
    lk.nn.functional.cross_entropy(model(x), y).backward()
    want = np.linalg.norm(model[2].weight.grad.numpy())
    assert any(np.isclose(v, want, rtol=1e-5) for v in pic.norms.values())


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_gradient_flow_marks_nan_in_red():
    w = lk.nn.Parameter(lk.tensor(np.array([1.0, -1.0, 4.0], np.float32)))

    @lk.function
    def step(x):
        loss = (w * x).sqrt().sum()       # sqrt of a negative: NaN, and a NaN gradient
        loss.backward()
        w.assign_sub(w.grad * 0.1)
        return loss

    pic = lk.viz.gradient_flow(step, lk.ones(3))
    assert "NaN/Inf" in pic.dot and f'color="{NONFINITE}"' in pic.dot
