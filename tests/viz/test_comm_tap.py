"""comm_tap: a widget's message is heard on the shell channel thread as it arrives, and then
goes on to the kernel untouched (its signature not taken for a replay)."""
import asyncio

import pytest

from labkit.viz import comm_tap

jupyter_client = pytest.importorskip("jupyter_client")
zmq = pytest.importorskip("zmq")


def _frames(session, msg_type, content):
    """A shell message as the kernel's shell channel thread receives it (zmq frames,
    identities first)."""
    msg = session.msg(msg_type, content)
    return [zmq.Frame(b) for b in session.serialize(msg, ident=[b"page"])]


def _session():
    return jupyter_client.session.Session(key=b"secret-key")


def test_hear_hands_a_comm_message_to_its_listener_and_leaves_it_unread(monkeypatch):
    session = _session()
    heard = []
    monkeypatch.setattr(comm_tap, "_listeners", {"w1": heard.append})
    click = {"method": "custom", "content": {"event": "stop", "run": 3}}
    frames = _frames(session, "comm_msg", {"comm_id": "w1", "data": click})
    comm_tap.hear(session, frames)
    assert heard == [click]
    # the kernel reads the same message afterwards: not refused as a replayed signature
    _, parts = session.feed_identities(frames, copy=False)
    assert session.deserialize(parts, copy=False)["content"]["data"] == click
    # other widgets' messages and other kinds of message are not handed over
    comm_tap.hear(session, _frames(session, "comm_msg", {"comm_id": "w2", "data": click}))
    comm_tap.hear(session, _frames(session, "execute_request", {"code": "1"}))
    assert heard == [click]


class _FakeKernel:
    """The parts of an ipykernel 7 kernel the tap uses: the shell channel thread (its loop and
    the stream reading the shell socket), the handler the stream calls, and the session."""

    def __init__(self):
        self.session = _session()
        self.forwarded = []
        kernel = self

        class Stream:
            callback = None

            def on_recv(self, callback, copy=True):
                self.callback = callback

        class Loop:
            def add_callback(self, f):
                f()

        class Thread:
            shell_stream = Stream()
            io_loop = Loop()

        self.shell_channel_thread = Thread()

        async def shell_channel_thread_main(frames):
            kernel.forwarded.append(frames)

        self.shell_channel_thread_main = shell_channel_thread_main

    def receive(self, frames):
        asyncio.run(self.shell_channel_thread.shell_stream.callback(frames))


def test_listen_taps_the_shell_channel_once_and_forwards_every_message(monkeypatch):
    kernel = _FakeKernel()
    monkeypatch.setattr(comm_tap, "_kernel", lambda: kernel)
    monkeypatch.setattr(comm_tap, "_listeners", {})
    monkeypatch.setattr(comm_tap, "_tapped", None)
    heard = []
    assert comm_tap.listen("w1", heard.append)
    tap = kernel.shell_channel_thread.shell_stream.callback
    assert comm_tap.listen("w1", heard.append)           # once per kernel
    assert kernel.shell_channel_thread.shell_stream.callback is tap
    click = _frames(kernel.session, "comm_msg", {"comm_id": "w1", "data": {"x": 1}})
    kernel.receive(click)
    garbage = [zmq.Frame(b"not a message")]
    kernel.receive(garbage)                              # a bad message still goes on
    comm_tap.forget("w1")
    kernel.receive(click)
    assert heard == [{"x": 1}]
    assert kernel.forwarded == [click, garbage, click]


def test_no_tap_without_ipykernel_7(monkeypatch):
    class OldKernel:                       # ipykernel 6: no shell channel thread
        session = _session()

    monkeypatch.setattr(comm_tap, "_kernel", lambda: OldKernel())
    monkeypatch.setattr(comm_tap, "_listeners", {})
    monkeypatch.setattr(comm_tap, "_tapped", None)
    assert comm_tap.listen("w1", print) is False and comm_tap._listeners == {}
