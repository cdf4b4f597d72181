"""lk.viz.live: the loop ends cleanly at the next step when Stop is pressed (by a click heard
while the kernel is busy, by ``view.stop()`` or by an interrupt), a late click never stops a
later loop, the cell says where it stopped, and the curves have axis titles."""
import importlib
import importlib.util
import signal
import threading
import xml.etree.ElementTree as ET

import pytest

import labkit as lk
from labkit.viz import comm_tap

live = importlib.import_module("labkit.viz.live")
SVG = "{http://www.w3.org/2000/svg}"
needs_anywidget = pytest.mark.skipif(importlib.util.find_spec("anywidget") is None,
                                     reason="anywidget is not installed")


def test_stop_ends_the_loop_cleanly():
    view = lk.viz.live(display=False)
    seen = []
    for step in view.steps(1000):
        view.log(loss=1.0 / (step + 1), accuracy=lk.tensor(step / 10.0))
        seen.append(step)
        if step == 3:
            view.stop()                      # what the Stop button does
    assert seen == [0, 1, 2, 3] and view.stopped and view.stop_reason == "view.stop()"
    assert view.history["loss"][-1] == (3, 0.25)
    assert view.history["accuracy"][-1] == (3, pytest.approx(0.3))
    root = ET.fromstring(view.svg())
    assert len(root.findall(f".//{SVG}polyline")) == 2
    for step in view.steps(3):               # a new loop starts afresh
        pass
    assert step == 2 and not view.stopped


def test_curves_have_axis_titles_and_ticks_inside_the_picture():
    view = lk.viz.live(display=False)
    for step in view.steps(120):
        view.log(loss=1.0 / (step + 1), accuracy=step / 120)
    root = ET.fromstring(view.svg())
    width = float(root.get("width"))
    for panel in root.iter(SVG + "g"):
        if panel.get("class") != "lk-panel":
            continue
        titles = [t.text for t in panel.iter(SVG + "text") if t.get("class") == "lk-axis-title"]
        assert titles == ["step", panel.get("data-metric")]
        ticks = [t for t in panel.iter(SVG + "text") if t.text == "119"]
        assert ticks and ticks[0].get("text-anchor") == "end"      # the last step, not cut off
        assert float(ticks[0].get("x")) <= width


def test_a_stopped_loop_says_where_it_stopped(capsys, monkeypatch):
    monkeypatch.setattr(live, "_in_kernel", lambda: False)      # a script: progress is printed
    view = lk.viz.live(title="digits", print_every=1e9)
    for step in view.steps(50):
        view.log(loss=1.0)
        if step == 6:
            view.stop("the Stop button")
    assert "digits: stopped at step 7/50 by the Stop button" in capsys.readouterr().out
    for step in view.steps(5):               # a loop that runs to its end says nothing of it
        pass
    assert "stopped" not in capsys.readouterr().out


def _view_with_widget(monkeypatch, heard_busy=True):
    """A view with its widget (as in a notebook) and ``comm_tap.listen`` replaced by a stub that
    records the listener; returns the view and the record."""
    record = {"listening": {}, "calls": []}

    def listen(comm_id, callback):
        record["calls"].append(comm_id)
        if heard_busy:
            record["listening"][comm_id] = callback
        return heard_busy

    monkeypatch.setattr(comm_tap, "listen", listen)
    monkeypatch.setattr(comm_tap, "forget", lambda cid: record["listening"].pop(cid, None))
    view = live.TrainingView(display=False)
    view._build_widget()                     # the widget a notebook would show
    return view, record


@needs_anywidget
def test_a_click_heard_while_busy_ends_the_loop_at_the_next_step(monkeypatch):
    view, record = _view_with_widget(monkeypatch)
    widget = view.widget
    seen = []
    for step in view.steps(None):            # until stopped
        view.log(loss=float(step))
        seen.append(step)
        assert widget.state == "running" and widget.can_stop
        if step == 2:
            # the page sends {"event": "stop", "run": k}; comm_tap hands it over on the
            # kernel's shell channel thread, while this step still runs
            tap = record["listening"][widget.model_id]
            click = {"method": "custom", "content": {"event": "stop", "run": widget.run}}
            t = threading.Thread(target=tap, args=(click,))
            t.start()
            t.join()
            assert view.stopped and seen == [0, 1, 2]     # the step itself runs to its end
    assert seen == [0, 1, 2] and view.stop_reason == "the Stop button"
    assert widget.state == "stopped" and "<svg" in widget.svg and "stopped" in widget.status
    assert record["listening"] == {}          # no longer listening once the loop is over
    bundle = view._repr_mimebundle_()         # one display: the widget and the static curves
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "<svg" in bundle["text/html"] and "lk-live" in bundle["text/html"]


@needs_anywidget
def test_a_late_click_never_stops_a_later_loop(monkeypatch):
    view, record = _view_with_widget(monkeypatch)
    for step in view.steps(3):
        pass
    first_run = view.widget.run
    assert view.widget.state == "done"
    # the click of the first loop, read by the kernel after its cell (the main thread's
    # handler): nothing runs, nothing stops
    view._on_widget_msg(view.widget, {"event": "stop", "run": first_run}, [])
    assert not view.stopped
    seen = []
    for step in view.steps(5):
        seen.append(step)
        tap = record["listening"][view.widget.model_id]
        tap({"method": "custom", "content": {"event": "stop", "run": first_run}})
        tap({"method": "update", "state": {"run": 0}})     # widget state: not a click
    assert seen == [0, 1, 2, 3, 4] and not view.stopped and view.widget.state == "done"


@needs_anywidget
def test_without_a_tap_the_button_says_to_interrupt(monkeypatch):
    view, record = _view_with_widget(monkeypatch, heard_busy=False)
    for step in view.steps(2):
        assert not view.widget.can_stop and "interrupt" in view.widget.hint
    assert record["calls"] == [view.widget.model_id]


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="signals reach the main thread only")
def test_first_interrupt_stops_softly_the_second_raises():
    view = lk.viz.live(display=False)
    seen = []
    for step in view.steps(100):
        seen.append(step)
        if step == 1:
            signal.raise_signal(signal.SIGINT)        # the kernel's ■: ends after this step
            assert "stopping: an interrupt (interrupt again to raise" in view.status()
            seen.append("step finished")
    assert seen == [0, 1, "step finished"] and view.stop_reason == "an interrupt"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        for step in view.steps(100):
            if step == 1:
                signal.raise_signal(signal.SIGINT)
                signal.raise_signal(signal.SIGINT)    # pressed twice: raise at once
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_only_logged_metrics_get_a_panel_and_one_rate_is_reported():
    view = lk.viz.live(display=False)                 # metrics ("loss", "accuracy") by default
    for step in view.steps(5):
        view.log(loss=1.0 / (step + 1))               # the loss alone
    svg = view.svg()
    assert 'data-metric="loss"' in svg and 'data-metric="accuracy"' not in svg
    assert "nothing logged" not in svg
    # the rate is fixed when the loop ends: the picture and the status line agree, later too
    rate = view.status().split(" · ")[-1]
    assert rate.endswith("steps/s") and rate in svg
    import time
    time.sleep(0.05)
    assert view.status().split(" · ")[-1] == rate
    fresh = lk.viz.live(display=False)                # nothing logged yet: the metrics named
    assert 'data-metric="loss"' in fresh.svg() and 'data-metric="accuracy"' in fresh.svg()
