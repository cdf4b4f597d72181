"""Nothing frozen silently: every Python value a trace reads is guarded (labkit/graph/guards.py).

One test per kind of value an eager call reads afresh and a trace would bake in: a changed value
either traces again (the number of traces and the reason, naming the value, asserted) or is an
input of the graph (no retrace, and the result follows it). Results are checked against the
eager function each time.
"""
import math
import warnings

import numpy as np
import pytest

import labkit as lk
from labkit.graph.guards import MISSING

SCALE = 2.0
FLAG = True
MODE = "double"
CONFIG = {"scale": 3.0}
UNUSED = 1


class Settings:
    def __init__(self):
        self.offset = 1.0


SETTINGS = Settings()


def _same(f, eager, *args):
    np.testing.assert_allclose(f(*args).detach().numpy(), eager(*args).detach().numpy(),
                               rtol=1e-6)


def test_global_number_retraces_naming_it_and_reuses_the_old_trace():
    global SCALE

    def body(x):
        return x * SCALE
    f = lk.function(body)
    _same(f, body, lk.ones(2))
    SCALE = 3.0
    try:
        _same(f, body, lk.ones(2))
        assert [t.reason for t in f.traces] == ["first call", "global SCALE: 2.0 -> 3.0"]
        SCALE = 2.0                       # back to a value a trace was made with: reused
        _same(f, body, lk.ones(2))
        assert len(f.traces) == 2
    finally:
        SCALE = 2.0


def test_type_of_a_number_is_guarded():
    global SCALE
    f = lk.function(lambda x: x * SCALE)
    f(lk.ones(1))
    SCALE = 2                             # 2 == 2.0, but an int: a trace may have used it so
    try:
        f(lk.ones(1))
        assert f.traces[1].reason == "global SCALE: 2.0 -> 2"
    finally:
        SCALE = 2.0


def test_closure_variable_retraces():
    factor = 1.5

    def body(x):
        return x * factor
    f = lk.function(body)
    _same(f, body, lk.ones(2))
    factor = 4.0
    _same(f, body, lk.ones(2))
    assert len(f.traces) == 2
    assert f.traces[1].reason.startswith("closure variable factor (of ")
    assert f.traces[1].reason.endswith(": 1.5 -> 4.0")


def test_module_attribute_retraces():
    class Shift(lk.nn.Module):
        def __init__(self):
            super().__init__()
            self.eps = 1e-5

        def forward(self, x):
            return x + self.eps

    m = lk.nn.Sequential(lk.nn.Linear(2, 2), Shift())
    f = lk.function(m)
    _same(f, m, lk.ones(1, 2))
    m[1].eps = 0.5
    _same(f, m, lk.ones(1, 2))
    assert [t.reason for t in f.traces][1] == "Shift.eps (module 1): 1e-05 -> 0.5"


def test_builtin_module_attribute_retraces():
    drop = lk.nn.Dropout(0.5)
    f = lk.function(lambda x: drop(x))
    f(lk.ones(100))
    drop.p = 0.0                          # eagerly: no dropout at all now
    np.testing.assert_array_equal(f(lk.ones(100)).numpy(), np.ones(100))
    assert f.traces[1].reason == "Dropout.p: 0.5 -> 0.0"


def test_bool_flag_on_a_module_retraces():
    class Cached(lk.nn.Module):
        def __init__(self):
            super().__init__()
            self.use_cache = False

        def forward(self, x):
            return x * 2.0 if self.use_cache else x

    m = Cached()
    f = lk.function(m)
    _same(f, m, lk.ones(2))
    m.use_cache = True
    _same(f, m, lk.ones(2))
    assert f.traces[1].reason == "Cached.use_cache: False -> True"


def test_global_bool_flag_and_string_mode_retrace():
    global FLAG, MODE

    def body(x):
        y = x * 2.0 if MODE == "double" else x * 3.0
        return y + 1.0 if FLAG else y
    f = lk.function(body)
    _same(f, body, lk.ones(2))
    try:
        FLAG = False
        _same(f, body, lk.ones(2))
        MODE = "triple"
        _same(f, body, lk.ones(2))
        assert [t.reason for t in f.traces[1:]] == ["global FLAG: True -> False",
                                                    "global MODE: 'double' -> 'triple'"]
    finally:
        FLAG, MODE = True, "double"


def test_none_ness_of_an_attribute_retraces():
    class Maybe(lk.nn.Module):
        def __init__(self):
            super().__init__()
            self.bias = None

        def forward(self, x):
            return x if self.bias is None else x + self.bias

    m = Maybe()
    f = lk.function(m)
    _same(f, m, lk.ones(2))
    m.bias = 1.0
    _same(f, m, lk.ones(2))
    assert f.traces[1].reason == "Maybe.bias: None -> 1.0"


def test_attribute_of_an_object_and_dict_entry_read_by_the_code_retrace():
    def body(x):
        return x * CONFIG["scale"] + SETTINGS.offset
    f = lk.function(body)
    _same(f, body, lk.ones(2))
    try:
        SETTINGS.offset = 2.0
        _same(f, body, lk.ones(2))
        CONFIG["scale"] = 5.0
        _same(f, body, lk.ones(2))
        assert [t.reason for t in f.traces[1:]] == ["global SETTINGS.offset: 1.0 -> 2.0",
                                                    "global CONFIG['scale']: 3.0 -> 5.0"]
    finally:
        SETTINGS.offset, CONFIG["scale"] = 1.0, 3.0


def test_attribute_of_self_in_a_method_retraces():
    class Scaler:
        def __init__(self):
            self.factor = 2.0

        def apply(self, x):
            return x * self.factor

    s = Scaler()
    f = lk.function(lambda x: s.apply(x))
    f(lk.ones(1))
    s.factor = 5.0
    assert f(lk.ones(1)).tolist() == [5.0]
    assert f.traces[1].reason == "self.factor (in test_attribute_of_self_in_a_method_retraces." \
                                 "<locals>.Scaler.apply): 2.0 -> 5.0"


def test_a_tensor_rebound_to_another_object_retraces():
    state = {"w": lk.tensor([1.0, 2.0])}
    holder = Settings()
    holder.w = state["w"]
    f = lk.function(lambda x: x * holder.w)
    assert f(lk.ones(2)).tolist() == [1.0, 2.0]
    holder.w = lk.tensor([3.0, 4.0])      # a new tensor, not an in-place write
    assert f(lk.ones(2)).tolist() == [3.0, 4.0]
    assert f.traces[1].reason.endswith("holder.w (of test_a_tensor_rebound_to_another_object_"
                                       "retraces.<locals>.<lambda>): now another Tensor object")


def test_a_value_on_a_branch_not_taken_is_not_guarded():
    global UNUSED

    def body(x, debug=False):
        if debug:
            return x * UNUSED
        return x + 1.0
    f = lk.function(body)
    f(lk.ones(1))
    UNUSED = 7
    try:
        f(lk.ones(1))
        assert len(f.traces) == 1
    finally:
        UNUSED = 1


def test_a_value_made_inside_the_trace_is_not_guarded():
    def body(x):
        k = 2.0
        inner = lambda y: y * k          # noqa: E731 (a closure made while tracing)
        return inner(x)
    f = lk.function(body)
    for _ in range(3):
        assert f(lk.ones(1)).tolist() == [2.0]
    assert len(f.traces) == 1


def test_hook_added_after_the_trace_retraces():
    m = lk.nn.Linear(2, 2)
    f = lk.function(m)
    f(lk.ones(1, 2))
    m.register_forward_hook(lambda mod, args, out: out * 0.0)
    assert f(lk.ones(1, 2)).tolist() == [[0.0, 0.0]]
    assert f.traces[1].reason == "number of forward hooks of Linear: 0 -> 1"


def test_a_layer_replaced_or_added_after_the_trace_retraces():
    class Stack(lk.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = lk.nn.ModuleList([lk.nn.Linear(2, 2)])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    m = Stack()
    f = lk.function(m)
    _same(f, m, lk.ones(1, 2))
    m.layers[0] = lk.nn.Linear(2, 2)          # another layer, other weights
    _same(f, m, lk.ones(1, 2))
    m.layers.append(lk.nn.Linear(2, 2))
    _same(f, m, lk.ones(1, 2))
    assert [t.reason for t in f.traces[1:]] == [
        "ModuleList.0 (module layers): now another Linear object",
        "number of modules of ModuleList (module layers): 1 -> 2"]


def test_guard_details_are_listed():
    f = lk.function(lambda x: x * SCALE)
    f(lk.ones(1))
    [g] = list(f.traces[0].guards)
    assert g.what == "global SCALE" and g.expected == 2.0 and g.where[0] == __file__
    assert "global SCALE == 2.0 (read at" in f.traces[0].guards.describe()
    assert g.current() == 2.0 and MISSING is not None


# ---- optimisers: hyperparameters are inputs, switches and flags are guarded ------------------
def _mlp():
    lk.manual_seed(0)
    return lk.nn.Sequential(lk.nn.Linear(4, 8), lk.nn.Tanh(), lk.nn.Linear(8, 1))


def _train(captured, set_lr, steps=20, make_opt=None, inside=False):
    """Losses of a step trained ``steps`` times with the rate ``set_lr(opt, it)`` gives."""
    model = _mlp()
    opt = (make_opt or (lambda p: lk.optim.AdamW(p, lr=1e-2, weight_decay=0.1)))(
        model.parameters())
    x, y = lk.randn(16, 4), lk.randn(16, 1)
    it = 0

    def body(x, y):
        if inside:
            set_lr(opt, it)
        opt.zero_grad()
        loss = lk.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss
    step = lk.function(body) if captured else body
    losses = []
    for it in range(steps):
        if not inside:
            set_lr(opt, it)
        losses.append(step(x, y).item())
    return losses, step


def _nanogpt_lr(opt, it, warmup=5, decay=15, top=1e-2, low=1e-3):
    """nanoGPT's get_lr: linear warmup, cosine decay to ``low``; set by hand each iteration."""
    if it < warmup:
        lr = top * (it + 1) / (warmup + 1)
    elif it > decay:
        lr = low
    else:
        ratio = (it - warmup) / (decay - warmup)
        lr = low + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (top - low)
    for group in opt.param_groups:
        group["lr"] = lr


def test_nanogpt_lr_schedule_set_by_hand_is_an_input_of_the_captured_step():
    eager, _ = _train(False, _nanogpt_lr)
    captured, step = _train(True, _nanogpt_lr)
    np.testing.assert_allclose(captured, eager, rtol=1e-5)
    assert len(step.traces) == 1              # the rate is read at run time: no retrace


def test_lr_computed_inside_the_captured_step_retraces_and_stays_right():
    """The silent freeze of issue 32: the step computes the rate from a Python counter and sets
    it into param_groups inside the captured function. The counter is guarded: each new value
    traces again (warned about once it reaches the cache size limit), and the losses are the
    eager ones."""
    eager, _ = _train(False, _nanogpt_lr, inside=True)
    with pytest.warns(UserWarning, match=r"traced 8 times because closure variable it .*"
                      r"keeps changing.*set param_groups\[\.\.\.\] outside the function"):
        captured, step = _train(True, _nanogpt_lr, inside=True)
    np.testing.assert_allclose(captured, eager, rtol=1e-5)
    assert len(step.traces) == 20
    assert step.traces[3].reason.startswith("closure variable it (of ")
    assert step.traces[3].reason.endswith(": 2 -> 3")
    # only cache_size_limit traces of the signature are kept; older ones are released
    kept = [t for t in step.traces if t.plan is not None]
    assert len(kept) == lk.config._state["cache_size_limit"]


def test_lr_set_by_a_scheduler_is_an_input():
    holder = {}

    def schedule(opt, it):
        if it == 0:
            holder["sched"] = lk.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
        else:
            holder["sched"].step()
    eager, _ = _train(False, schedule, steps=12)
    captured, step = _train(True, schedule, steps=12)
    np.testing.assert_allclose(captured, eager, rtol=1e-5)
    assert len(step.traces) == 1


def test_optimizer_flag_changed_after_capture_retraces():
    def flip(opt, it):
        opt.param_groups[0]["nesterov"] = it >= 3
    make = lambda p: lk.optim.SGD(p, lr=0.1, momentum=0.9)     # noqa: E731
    eager, _ = _train(False, flip, steps=6, make_opt=make)
    captured, step = _train(True, flip, steps=6, make_opt=make)
    np.testing.assert_allclose(captured, eager, rtol=1e-5)
    assert [t.reason for t in step.traces] == [
        "first call", "optimizer SGD param_groups[0]['nesterov']: False -> True"]


def test_param_group_added_after_capture_retraces():
    model, extra = _mlp(), lk.nn.Parameter(lk.ones(1))
    opt = lk.optim.SGD(model.parameters(), lr=0.1)

    @lk.function
    def step(x):
        opt.zero_grad()
        (model(x).sum() + extra.sum()).backward()
        opt.step()
    step(lk.ones(2, 4))
    opt.add_param_group({"params": [extra]})
    step(lk.ones(2, 4))
    assert extra.tolist() == pytest.approx([0.9])      # the new group is updated
    assert step.traces[1].reason == "number of optimizer SGD param_groups: 1 -> 2"


def _calls_with_new_values(f, n=12):
    """Call ``f`` with SCALE set to 0, 1, ... n-1 (each result checked); the warnings."""
    global SCALE
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for i in range(n):
                SCALE = float(i)
                assert f(lk.ones(1)).tolist() == [float(i)]
    finally:
        SCALE = 2.0
    return caught


def test_many_values_warn_once_and_keep_tracing_with_lk_function():
    f = lk.function(lambda x: x * SCALE)
    caught = _calls_with_new_values(f)
    said = [str(w.message) for w in caught if "keeps changing" in str(w.message)]
    assert len(said) == 1 and "global SCALE" in said[0]
    assert caught[0].filename == __file__
    assert len(f.traces) == 12


def test_many_values_hit_lk_compiles_cache_size_limit_then_run_eagerly():
    global SCALE
    f = lk.compile(lambda x: x * SCALE)
    said = [str(w.message) for w in _calls_with_new_values(f)]
    assert len(f.traces) == 8                 # then new values run eagerly
    assert len(said) == 1 and said[0].startswith(
        "lk.compile hit config.cache_size_limit (8)\n   function: '<lambda>'")
    assert "last reason: global SCALE: 7.0 -> 8.0" in said[0]
    SCALE = 3.0                               # a value a trace was made with: its graph again
    try:
        assert f(lk.ones(1)).tolist() == [3.0] and len(f.traces) == 8
    finally:
        SCALE = 2.0
    lk.compiler.reset()
    assert f.traces == []
