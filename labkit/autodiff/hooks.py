"""Gradient hooks: functions that run when ``backward()`` has put a leaf's gradient in ``.grad``,
and callbacks queued to run when the backward pass that is running ends.

``t.register_post_accumulate_grad_hook(hook)`` (PyTorch's name) calls ``hook(t)`` in each
eager ``backward()`` that accumulates into ``t.grad``, as soon as that gradient is complete:
during the pass, once every op that reads ``t`` has had its gradient computed, while the pass
goes on through earlier ops (so ``DataParallel`` starts communicating during backward). It
returns a handle whose ``remove()`` unregisters it. Hooks run in the order they were registered,
leaf by leaf in the order the pass finished them. A hook may call ``queue_callback(fn)``: ``fn()`` then runs once the whole pass has
handed out every gradient (how ``DataParallel`` averages all gradients after one backward, when
its parameters' hooks have fired).

Hooks hold no reference to their tensor: a tensor that is collected takes its hooks with it.

>>> import labkit as lk
>>> w = lk.tensor([1.0, 2.0], requires_grad=True)
>>> seen = []
>>> handle = w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
>>> (w * w).sum().backward()
>>> seen
[[2.0, 4.0]]
>>> handle.remove()
"""
import itertools
import threading
import weakref

from ..errors import GradError

# id(tensor) -> (weak reference to it, {handle id: hook}); not a WeakKeyDictionary, which would
# compare tensors with == (elementwise)
_hooks = {}
_ids = itertools.count()
_passes = itertools.count()
_state = threading.local()               # .queues: one list of callbacks per running pass


class RemovableHandle:
    """Returned by ``register_post_accumulate_grad_hook``; ``remove()`` unregisters the hook."""

    __slots__ = ("_tensor", "_id")

    def __init__(self, tensor, hook_id):
        self._tensor = weakref.ref(tensor)
        self._id = hook_id

    def remove(self):
        tensor = self._tensor()
        entry = _hooks.get(id(tensor)) if tensor is not None else None
        if entry is not None:
            entry[1].pop(self._id, None)
            if not entry[1]:
                del _hooks[id(tensor)]


def register_post_accumulate_grad_hook(tensor, hook):
    """Call ``hook(tensor)`` after every eager backward pass that accumulates into
    ``tensor.grad``; returns a handle with ``remove()``."""
    if not callable(hook):
        raise TypeError(f"register_post_accumulate_grad_hook: hook must be callable, got "
                        f"{type(hook).__name__}")
    if not tensor._requires_grad or tensor._node is not None:
        raise GradError(
            "register_post_accumulate_grad_hook: only a leaf tensor that requires grad (a "
            "parameter, or a tensor made with requires_grad=True) has its gradient accumulated "
            "into .grad")
    hook_id = next(_ids)
    entry = _hooks.get(id(tensor))
    if entry is None:
        key = id(tensor)
        entry = _hooks[key] = (weakref.ref(tensor, lambda _, key=key: _forget(key)), {})
    entry[1][hook_id] = hook
    return RemovableHandle(tensor, hook_id)


def _forget(key):
    if _hooks is not None:            # None while the interpreter shuts down
        _hooks.pop(key, None)


_leaf_grads_hooks = []     # fn(leaf_grads, done) run before a backward pass hands gradients out


def register_leaf_grads_hook(fn):
    """Call ``fn(leaf_grads, done)`` in every backward pass that accumulates into ``.grad``
    (eager or captured), after the walk and before the gradients are handed out:
    ``leaf_grads`` maps ``id(leaf)`` to ``(leaf, gradient from this pass)``, and ``fn`` may
    replace gradients or add leaves (``done``: ids already handed out during the walk). How
    tensors made of other tensors (a DTensor's replicas on several devices) add up their
    pieces' shares."""
    _leaf_grads_hooks.append(fn)


def has_hooks():
    return len(_hooks) > 0


def has_hook(tensor):
    """Whether ``tensor`` has a post-accumulate hook."""
    entry = _hooks.get(id(tensor))
    return entry is not None and entry[0]() is tensor


def run_post_accumulate_hooks(tensor):
    entry = _hooks.get(id(tensor))
    if entry is not None and entry[0]() is tensor:
        for hook in list(entry[1].values()):
            hook(tensor)


def current_pass():
    """A number naming the backward pass now running (None outside one)."""
    queues = getattr(_state, "queues", None)
    return queues[-1][0] if queues else None


def queue_callback(fn):
    """Run ``fn()`` when the backward pass now running has handed out every gradient (call
    from a gradient hook)."""
    queues = getattr(_state, "queues", None)
    if not queues:
        raise GradError("queue_callback: no backward pass is running; call it from a gradient "
                        "hook")
    queues[-1][1].append(fn)


class callbacks_of_pass:
    """Context for one backward pass: callbacks queued during it run at its end, in order."""

    def __enter__(self):
        queues = getattr(_state, "queues", None)
        if queues is None:
            queues = _state.queues = []
        queues.append((next(_passes), []))
        return self

    def __exit__(self, exc_type, exc, tb):
        queue = _state.queues[-1][1]
        try:
            i = 0
            while exc_type is None and i < len(queue):    # a callback may queue another
                queue[i]()
                i += 1
        finally:
            _state.queues.pop()
        return False
