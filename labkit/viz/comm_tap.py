"""Hear a widget's messages from the front end while the kernel is busy running a cell.

A kernel runs cells on its main thread, and a widget's messages from the page (a click on a
button) wait behind the running cell: a loop cannot see its own Stop button being pressed.
ipykernel 7 receives every message of the shell channel on a thread of its own (the *shell
channel thread*) and only then hands it to the main thread. ``listen(comm_id, callback)`` taps
that thread: a message the front end sends to the widget ``comm_id`` calls ``callback(data)``
at once, on the shell channel thread, and then goes on to the main thread exactly as before
(so the widget's own handlers still see it, after the cell).

A callback runs beside the cell's code on another thread: it should only record what it heard
(set a flag) and leave the rest to the main thread. ``listen`` returns False, and does nothing,
where no tap is possible: outside a kernel, or with an ipykernel older than 7.

>>> listen("a-comm-id", print)      # no kernel here: nothing to tap
False
"""
import inspect
import threading

_lock = threading.Lock()
_listeners = {}        # comm id -> callback(data)
_tapped = None         # the kernel whose shell channel thread carries the tap


def _kernel():
    """The Jupyter kernel this code runs in, or None (a script, a plain IPython shell)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    ip = get_ipython()
    return getattr(ip, "kernel", None) if ip is not None else None


def listen(comm_id, callback):
    """Call ``callback(data)`` for each message the front end sends to the widget whose comm
    (model) id is ``comm_id``, even while a cell runs; True where the kernel allows it."""
    kernel = _kernel()
    if kernel is None or not _tap(kernel):
        return False
    with _lock:
        _listeners[comm_id] = callback
    return True


def forget(comm_id):
    """Stop calling the listener of ``comm_id`` (nothing happens if there is none)."""
    with _lock:
        _listeners.pop(comm_id, None)


def hear(session, frames):
    """The comm message in ``frames`` (a shell message as received, identities first), handed
    to its listener if it has one. The content is unpacked without recording the message's
    signature, so the kernel's own reading of it later is not taken for a replay."""
    _, parts = session.feed_identities(frames, copy=False)
    msg = session.deserialize(parts, content=False, copy=False)
    if msg["header"].get("msg_type") != "comm_msg" or not _listeners:
        return
    content = session.unpack(msg["content"])
    with _lock:
        callback = _listeners.get(content.get("comm_id"))
    if callback is not None:
        callback(content.get("data") or {})


def _tap(kernel):
    """Put the tap on ``kernel``'s shell channel thread (once); False where it has none."""
    global _tapped
    if _tapped is kernel:
        return True
    thread = getattr(kernel, "shell_channel_thread", None)
    stream = getattr(thread, "shell_stream", None)
    forward = getattr(kernel, "shell_channel_thread_main", None)
    loop = getattr(thread, "io_loop", None)
    session = getattr(kernel, "session", None)
    if None in (stream, forward, loop, session):
        return False

    async def tapped(frames):
        if _listeners:
            try:
                hear(session, frames)
            except Exception:   # noqa: BLE001 - never stand between the kernel and its messages
                pass
        result = forward(frames)
        if inspect.isawaitable(result):
            await result

    swapped = threading.Event()

    def swap():            # on the shell channel thread, between two of its messages
        stream.on_recv(tapped, copy=False)
        swapped.set()

    loop.add_callback(swap)
    if not swapped.wait(5.0):
        return False
    _tapped = kernel
    return True
