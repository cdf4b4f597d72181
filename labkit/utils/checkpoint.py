"""``torch.utils.checkpoint``: activation checkpointing in PyTorch's spelling.

``checkpoint(fn, *args, **kwargs)`` returns ``fn(*args, **kwargs)`` but keeps none of the values
computed inside ``fn`` for the backward pass: they are computed again there, from ``fn``'s
inputs (``labkit.autodiff.recompute``). Peak memory falls from every layer's activations to the
layers' inputs plus one layer's activations, for about one more forward pass of compute.

Gradients are the same as without checkpointing, eagerly and inside ``lk.function``, for the
arguments and for the parameters ``fn`` uses (a module's); random draws inside (dropout) are
replayed, so the masks match (``preserve_rng_state=False``: drawn afresh). This is PyTorch's
non-reentrant checkpoint; ``use_reentrant=True`` (or None) runs the same one, which gives what
the reentrant one gives and more (``lk.grad`` through it, outputs that need no gradient).

>>> import labkit as lk
>>> from labkit.utils.checkpoint import checkpoint
>>> block = lk.nn.Sequential(lk.nn.Linear(4, 8), lk.nn.GELU(), lk.nn.Linear(8, 4))
>>> x = lk.randn(2, 4, requires_grad=True)
>>> y = checkpoint(block, x, use_reentrant=False)
>>> y.sum().backward()
>>> x.grad.shape, block[0].weight.grad.shape
((2, 4), (8, 4))
"""
from ..autodiff.recompute import recompute
from ..nn.container import Sequential

__all__ = ["checkpoint", "checkpoint_sequential"]


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default",
               debug=False, early_stop=True, preserve_rng_state=True, **kwargs):
    """``function(*args, **kwargs)``, recomputed in the backward pass instead of kept.

    ``preserve_rng_state`` (default True): the recomputation draws the same random numbers.
    ``context_fn``: a function returning two context managers, entered around the first run
    and around the recomputation (PyTorch's selective-checkpointing hook).
    ``determinism_check="none"`` skips checking that the recomputation's outputs have the
    first run's shapes and dtypes. ``use_reentrant``, ``debug`` and ``early_stop`` change
    nothing. Under ``lk.no_grad()`` the function is simply called.
    """
    if use_reentrant not in (None, True, False):
        raise ValueError(f"checkpoint: use_reentrant must be True, False or None, got "
                         f"{use_reentrant!r}")
    if determinism_check not in ("default", "none"):
        raise ValueError(f"checkpoint: determinism_check must be 'default' or 'none', got "
                         f"{determinism_check!r}")
    return recompute(function, args, kwargs, preserve_rng_state=preserve_rng_state,
                     context_fn=context_fn, check=determinism_check == "default")


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run ``functions`` (an ``nn.Sequential``, or a list of modules/functions) one after
    another on ``input``, in ``segments`` pieces of about equal length, each checkpointed but
    the last (which is run plainly, as its outputs are needed right away), as PyTorch does.

    >>> import labkit as lk
    >>> from labkit.utils.checkpoint import checkpoint_sequential
    >>> net = lk.nn.Sequential(*[lk.nn.Linear(3, 3) for _ in range(4)])
    >>> checkpoint_sequential(net, 2, lk.ones(1, 3), use_reentrant=False).shape
    (1, 3)
    """
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise TypeError(f"checkpoint_sequential: unexpected keyword argument(s) "
                        f"{sorted(kwargs)}")
    if isinstance(functions, Sequential):
        functions = list(functions.children())
    functions = list(functions)
    if not isinstance(segments, int) or segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be a positive integer, got "
                         f"{segments!r}")
    size = len(functions) // segments
    if size == 0:
        raise ValueError(f"checkpoint_sequential: {segments} segments of {len(functions)} "
                         f"function(s): give at most {len(functions)} segments")

    def run(start, end):
        def forward(x):
            for f in functions[start:end + 1]:
                x = f(x)
            return x
        return forward

    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
    return run(end + 1, len(functions) - 1)(input)
