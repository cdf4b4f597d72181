"""Send/Recv: how a value crosses from one device's part of a graph to another's.

Partitioning (``labkit.graph.passes.partition``) puts a ``send`` on the source device and a
``recv`` on the destination device on every edge that crosses devices. They meet in a
*rendezvous*: a small thread-safe mailbox keyed by the pair's name and the run's step number,
so that concurrent runs of one plan never take each other's values. ``send`` puts the value
there and goes on; ``recv`` waits for it.

Moving the value is the job of the transfer layer (``labkit.devices.transfer``, which eager
``t.to()`` uses too): CPU to CPU hands the array over (virtual CPU devices share the host's
memory), CPU to GPU and back copy through the host, GPU to GPU is a peer copy. A ``send``
whose value may still change on its device (a variable that a later assign writes, a buffer
the executor reuses) sends a snapshot: ``copy=True``.

On a GPU, ``send`` records a CUDA event on its device's stream after the value is ready;
``recv`` makes its own stream wait for that event (or the host, for a GPU to CPU copy) before
copying, and waits for its copy to finish before the source array may be freed.

>>> from labkit.graph.rendezvous import Rendezvous
>>> rv = Rendezvous()
>>> rv.send("send_x", 0, 42)
>>> rv.recv("send_x", 0)
42
"""
import threading

from ..devices import get_device, transfer
from ..errors import GraphError
from ..tensor.op import op
from ..tensor.shape_rules import same_as_first


class RendezvousAborted(GraphError):
    """A recv stopped waiting because another part of the same run failed."""

    secondary = True     # a consequence of another error: the executor raises that one


class Rendezvous:
    """A mailbox of values keyed by (name, step); ``recv`` blocks until ``send`` has put one."""

    def __init__(self):
        self._cond = threading.Condition(threading.Lock())
        self._box = {}
        self._aborted = {}

    def send(self, name, step, value):
        with self._cond:
            self._box[(name, step)] = value
            self._cond.notify_all()

    def recv(self, name, step, timeout=None):
        key = (name, step)
        with self._cond:
            while key not in self._box:
                why = self._aborted.get(step)
                if why is not None:
                    raise RendezvousAborted(
                        f"recv {name!r} (step {step}) gave up: another device's part of this "
                        f"run failed with {type(why).__name__}: {why}")
                if not self._cond.wait(timeout):
                    raise GraphError(f"recv {name!r} (step {step}) timed out after {timeout} s "
                                     f"waiting for its send")
            return self._box.pop(key)

    def abort(self, step, error):
        """Wake every recv of ``step``: they raise instead of waiting for a send that may never
        come (a part of the run failed)."""
        with self._cond:
            self._aborted[step] = error
            self._cond.notify_all()

    def finish(self, step):
        """Forget ``step``: values nobody received (after a failure) and its abort mark."""
        with self._cond:
            self._aborted.pop(step, None)
            for key in [k for k in self._box if k[1] == step]:
                del self._box[key]

    def pending(self):
        """How many values wait to be received (0 between runs)."""
        with self._cond:
            return len(self._box)


_default = Rendezvous()     # for send/recv run outside a plan (each plan has its own)


def _cuda_event(device):
    cuda = device.xp.cuda
    ev = cuda.Event()
    ev.record()
    return ev


def send_value(rendezvous, name, step, value, src, copy):
    """What a ``send`` node does: put ``value`` (a snapshot when ``copy``) in the mailbox."""
    src = get_device(src)
    if copy:
        value = value.copy()
    ready = _cuda_event(src) if src.type == "gpu" else None
    rendezvous.send(name, step, (value, ready))


def recv_value(rendezvous, name, step, src, dst):
    """What a ``recv`` node does: wait for the value and move it to ``dst``."""
    value, ready = rendezvous.recv(name, step)
    src, dst = get_device(src), get_device(dst)
    if ready is not None:
        if dst.type == "gpu":
            dst.xp.cuda.get_current_stream().wait_event(ready)
        else:
            ready.synchronize()
    out = transfer(value, src, dst)
    if dst.type == "gpu" and src.type == "gpu":
        # the source array goes back to its stream's pool when we drop it: let the copy finish
        dst.xp.cuda.get_current_stream().synchronize()
    return out


def _send_kernel(xp, x, *, name, src, dst, copy, step=0, rendezvous=None):
    """Put ``x`` in the rendezvous under ``name`` for the ``recv`` on ``dst``; returns ``x``."""
    send_value(rendezvous or _default, name, step, x, src, copy)
    return x


def _recv_kernel(xp, sent, *, name, src, dst, step=0, rendezvous=None):
    """The value that the ``send`` named ``name`` put in the rendezvous, moved to ``dst``."""
    return recv_value(rendezvous or _default, name, step, src, dst)


# Not stateful: a pair is needed exactly when its recv's reader is, so a plan keeps it (or
# leaves it out) like any other computation, and a sub-graph with a pair stays recomputable.
# Partitioning runs last, after the optimisation passes, so they never see a pair.
send = op("send", shape=same_as_first, vjp=None, register=False)(_send_kernel)
recv = op("recv", shape=same_as_first, vjp=None, register=False)(_recv_kernel)
recv.out_device = lambda attrs: get_device(attrs["dst"])


def is_transfer_pair_op(op_):
    return op_ is send or op_ is recv
