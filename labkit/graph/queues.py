"""Queues as stateful ops: ``lk.FIFOQueue`` for input pipelines and coordinating steps.

Every queue operation (enqueue, enqueue_many, dequeue, dequeue_many, close, size) is an op
declared with ``stateful=True``, so it runs eagerly when called, and inside ``lk.function`` or
``with lk.Graph()`` it becomes a node that acts on the queue each time the graph runs. A
producer thread can fill a queue while a captured training step dequeues its batch from it.

Enqueue blocks while the queue is full, dequeue while it is empty (a condition variable, no
polling). ``close()`` ends the stream: later enqueues fail, and a dequeue that finds the queue
closed and empty raises ``QueueClosedError``, which a consumer catches to stop.

A dequeue has one output per component, but a graph node has one output: the dequeue node
takes an element off the queue and outputs a ticket (a 0-d int64), and one ``queue_component``
node per component hands out that element's component.

>>> import threading, labkit as lk
>>> q = lk.FIFOQueue(2, [lk.float32, lk.int64], [(3,), ()])
>>> def produce():
...     for i in range(5):
...         q.enqueue(lk.ones(3) * i, lk.tensor(i))
...     q.close()
>>> threading.Thread(target=produce).start()
>>> got = []
>>> while True:
...     try:
...         x, i = q.dequeue()
...     except lk.QueueClosedError:
...         break
...     got.append(int(i))
>>> got
[0, 1, 2, 3, 4]
"""
import collections
import itertools
import threading

import numpy as np

from ..devices import get_device
from ..errors import DTypeError, LabkitError, ShapeError, describe
from ..tensor.creation import tensor as _tensor
from ..tensor.dtypes import as_dtype, int64
from ..tensor.op import op
from ..tensor.tensor import Tensor

_CLAIMS_KEPT = 1024   # elements dequeued but not yet handed out (a pruned component): bounded


class QueueClosedError(LabkitError, RuntimeError):
    """A dequeue found the queue closed and empty (the end of the stream), or an enqueue found
    it closed."""


class QueueTimeoutError(LabkitError, TimeoutError):
    """A queue operation waited longer than the queue's ``timeout``."""


class FIFOQueue:
    """A first-in first-out queue of elements, each a tuple of tensors (its components).

    ``FIFOQueue(capacity, dtypes, shapes, name=None, device=None, timeout=None)``: ``dtypes``
    and ``shapes`` give each component's dtype and shape (one dtype and one shape: elements are
    single tensors). ``timeout`` (seconds) bounds every wait; None waits forever.

    Methods (each applies one stateful op): ``enqueue(*components)``,
    ``enqueue_many(*components)`` (each with a leading dimension n: n elements),
    ``dequeue()`` (a tensor, or a tuple of them), ``dequeue_many(n)`` (components stacked along
    a new first dimension), ``close(cancel_pending_enqueues=False)`` and ``size()``.

    >>> import labkit as lk
    >>> q = lk.FIFOQueue(10, lk.float32, (2,))
    >>> _ = q.enqueue_many(lk.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    >>> q.dequeue().tolist(), int(q.size())
    ([1.0, 2.0], 2)
    >>> q.dequeue_many(2).tolist()
    [[3.0, 4.0], [5.0, 6.0]]
    """

    _names = itertools.count()

    def __init__(self, capacity, dtypes, shapes, name=None, device=None, timeout=None):
        capacity = int(capacity)
        if capacity < 1:
            raise ValueError(f"FIFOQueue: capacity must be at least 1, got {capacity}")
        self.single = not isinstance(dtypes, (list, tuple))
        dtypes = [dtypes] if self.single else list(dtypes)
        if self.single:
            shapes = [shapes]
        elif not isinstance(shapes, (list, tuple)) or len(shapes) != len(dtypes):
            raise ValueError(f"FIFOQueue: {len(dtypes)} dtypes need as many shapes (a list of "
                             f"shapes, one per component), got {shapes!r}")
        if not dtypes:
            raise ValueError("FIFOQueue: an element needs at least one component (dtype)")
        self.capacity = capacity
        self.dtypes = tuple(as_dtype(d) for d in dtypes)
        self.shapes = tuple(_as_shape(s) for s in shapes)
        n = next(FIFOQueue._names)
        self.name = str(name) if name is not None else ("fifo_queue" if n == 0
                                                        else f"fifo_queue_{n}")
        self.device = get_device(device)
        self.timeout = timeout
        self._items = collections.deque()
        self._cv = threading.Condition()
        self._closed = False
        self._cancelled = False
        self._claims = {}                 # ticket -> list of components not yet handed out
        self._tickets = itertools.count(1)

    def __repr__(self):
        return (f"<FIFOQueue {self.name!r} capacity={self.capacity} "
                f"components={[f'{d.name}{list(s)}' for d, s in zip(self.dtypes, self.shapes)]}"
                f" @{self.device.name}>")

    @property
    def closed(self):
        """Whether ``close()`` has run."""
        return self._closed

    # ---- the user-facing methods (each binds one op) -----------------------------------------
    def enqueue(self, *components):
        """Add one element (its components, in order); blocks while the queue is full."""
        return _enqueue(*self._inputs(components, "enqueue"), queue=self, many=False)

    def enqueue_many(self, *components):
        """Add n elements given as components with a leading dimension n, in order."""
        return _enqueue(*self._inputs(components, "enqueue_many"), queue=self, many=True)

    def dequeue(self):
        """Take the oldest element: a tensor (one component) or a tuple of tensors. Blocks
        while the queue is empty; raises QueueClosedError once it is closed and empty."""
        return self._components(_dequeue(queue=self, n=0), 0)

    def dequeue_many(self, n):
        """Take the n oldest elements, each component stacked along a new first dimension.
        Raises QueueClosedError if the queue is closed with fewer than n elements left."""
        n = int(n)
        if n < 1:
            raise ValueError(f"dequeue_many from {self.name!r}: n must be at least 1, got {n}")
        return self._components(_dequeue(queue=self, n=n), n)

    def close(self, cancel_pending_enqueues=False):
        """Close the queue: enqueues fail from now on; dequeues drain what is left, then raise
        QueueClosedError. With ``cancel_pending_enqueues``, enqueues blocked on a full queue
        fail too."""
        return _close(queue=self, cancel=bool(cancel_pending_enqueues))

    def size(self):
        """The number of elements in the queue (a 0-d int64 tensor)."""
        return _size(queue=self)

    def _inputs(self, components, what):
        if len(components) == 1 and isinstance(components[0], (list, tuple)):
            components = tuple(components[0])
        if len(components) != len(self.dtypes):
            raise ValueError(f"{what} into {self.name!r}: an element has {len(self.dtypes)} "
                             f"component(s) ({', '.join(d.name for d in self.dtypes)}), got "
                             f"{len(components)}")
        out = []
        for c, dtype in zip(components, self.dtypes):
            if not isinstance(c, Tensor):
                c = _tensor(c, dtype=dtype, device=self.device)
            elif c.device is not self.device:
                c = c.to(self.device)
            out.append(c)
        return out

    def _components(self, ticket, n):
        parts = tuple(_component(ticket, queue=self, index=i, n=n)
                      for i in range(len(self.dtypes)))
        return parts[0] if self.single else parts

    # ---- what the kernels do -------------------------------------------------------------------
    def _wait(self, ready, what):
        """Wait on the condition until ``ready()``; the caller holds ``self._cv``."""
        if not self._cv.wait_for(ready, self.timeout):
            raise QueueTimeoutError(f"{what} on FIFOQueue {self.name!r} waited "
                                    f"{self.timeout} s ({len(self._items)} of {self.capacity} "
                                    f"elements queued); raise the queue's timeout, or check "
                                    f"that a producer / consumer is running")

    def _put(self, elements, what):
        with self._cv:
            if self._closed:
                raise QueueClosedError(f"{what} into FIFOQueue {self.name!r}: the queue is "
                                       f"closed; nothing can be added after close()")
            for element in elements:
                self._wait(lambda: len(self._items) < self.capacity or self._cancelled, what)
                if self._cancelled:
                    raise QueueClosedError(f"{what} into FIFOQueue {self.name!r}: cancelled by "
                                           f"close(cancel_pending_enqueues=True) while waiting "
                                           f"for room")
                self._items.append(element)
                self._cv.notify_all()

    def _take(self, n, what):
        count = max(n, 1)
        with self._cv:
            self._wait(lambda: len(self._items) >= count or self._closed, what)
            if len(self._items) < count:
                left = len(self._items)
                state = f"holds only {left} of the {count} elements asked for" if left \
                    else "empty"
                raise QueueClosedError(
                    f"{what} from FIFOQueue {self.name!r}: the queue is closed and {state} (the "
                    f"end of its input). Catch lk.QueueClosedError to stop the loop that reads "
                    f"it.")
            elements = [self._items.popleft() for _ in range(count)]
            self._cv.notify_all()
        return elements

    def _claim(self, components):
        ticket = next(self._tickets)
        with self._cv:
            self._claims[ticket] = list(components)
            while len(self._claims) > _CLAIMS_KEPT:     # components nobody asked for
                del self._claims[next(iter(self._claims))]
        return ticket

    def _hand_out(self, ticket, index):
        with self._cv:
            parts = self._claims.get(ticket)
            if parts is None or parts[index] is None:
                raise LabkitError(f"FIFOQueue {self.name!r}: component {index} of dequeued "
                                  f"element {ticket} is not available (handed out already, or "
                                  f"dropped after {_CLAIMS_KEPT} newer dequeues)")
            value, parts[index] = parts[index], None
            if all(p is None for p in parts):
                del self._claims[ticket]
        return value


def _as_shape(shape):
    if isinstance(shape, int):
        return (shape,)
    return tuple(int(s) for s in shape)


# ---- the ops ---------------------------------------------------------------------------------
def _count(*inputs, **attrs):
    return (), int64


def _enqueue_rule(*components, queue, many):
    what = "enqueue_many" if many else "enqueue"
    n = None
    for i, (c, dtype, shape) in enumerate(zip(components, queue.dtypes, queue.shapes)):
        if c.dtype is not dtype:
            raise DTypeError(f"{what} into FIFOQueue {queue.name!r}: component {i} must be "
                             f"{dtype.name}, got {describe(c)}; convert it with "
                             f".to(dtype=lk.{dtype.name})")
        got = tuple(c.shape)
        if many:
            if len(got) != len(shape) + 1 or got[1:] != shape:
                raise ShapeError(f"enqueue_many into FIFOQueue {queue.name!r}: component {i} "
                                 f"must have shape (n, {', '.join(map(str, shape))}) (n "
                                 f"elements of shape {shape}), got {describe(c)}")
            if n is not None and got[0] != n:
                raise ShapeError(f"enqueue_many into FIFOQueue {queue.name!r}: the components "
                                 f"hold different numbers of elements ({n} and {got[0]})")
            n = got[0]
        elif got != shape:
            raise ShapeError(f"enqueue into FIFOQueue {queue.name!r}: component {i} must have "
                             f"shape {shape}, got {describe(c)}")
    return (), int64


@op("queue_enqueue", shape=_enqueue_rule, vjp=None, register=False, stateful=True)
def _enqueue(xp, *components, queue, many):
    """Copy the components into the queue as one element (``many``: one per leading index)."""
    lead = 1 if many else 0
    for c, dtype, shape in zip(components, queue.dtypes, queue.shapes):
        if c.dtype != dtype.np or tuple(c.shape[lead:]) != shape or c.ndim != len(shape) + lead \
                or c.shape[:lead] != components[0].shape[:lead]:
            raise ValueError("component does not fit the queue")   # the rule explains it
    if many:
        n = components[0].shape[0]
        elements = [tuple(c[i].copy() for c in components) for i in range(n)]
    else:
        elements = [tuple(c.copy() for c in components)]
    queue._put(elements, "enqueue_many" if many else "enqueue")
    return queue.device.xp.asarray(len(elements), dtype=np.int64)


@op("queue_dequeue", shape=_count, vjp=None, register=False, stateful=True)
def _dequeue(xp, queue, n):
    """Take one element (``n == 0``) or n elements off the queue; output a ticket for them."""
    elements = queue._take(n, "dequeue_many" if n else "dequeue")
    if n:
        xpq = queue.device.xp
        components = [xpq.stack([e[i] for e in elements]) for i in range(len(queue.dtypes))]
    else:
        components = list(elements[0])
    return queue.device.xp.asarray(queue._claim(components), dtype=np.int64)


def _component_rule(ticket, queue, index, n):
    shape = queue.shapes[index]
    return ((n,) + shape if n else shape), queue.dtypes[index]


@op("queue_component", shape=_component_rule, vjp=None, register=False,
    stateful=True)
def _component(xp, ticket, queue, index, n):
    """Component ``index`` of the element(s) that dequeue node's ``ticket`` took."""
    return queue._hand_out(int(ticket), index)


@op("queue_close", shape=_count, vjp=None, register=False, stateful=True)
def _close(xp, queue, cancel):
    """Close the queue (waking every waiting enqueue and dequeue); outputs its size."""
    with queue._cv:
        queue._closed = True
        queue._cancelled = queue._cancelled or cancel
        queue._cv.notify_all()
        size = len(queue._items)
    return queue.device.xp.asarray(size, dtype=np.int64)


@op("queue_size", shape=_count, vjp=None, register=False, stateful=True)
def _size(xp, queue):
    """The number of elements now in the queue."""
    with queue._cv:
        size = len(queue._items)
    return queue.device.xp.asarray(size, dtype=np.int64)


for _op in (_dequeue, _close, _size):
    _op.out_device = lambda attrs: attrs["queue"].device
