"""Version counters: finding the values autodiff saved that an in-place write has since changed.

The tape keeps each op's input tensors and output array for the backward pass. An in-place write
(``assign``, ``assign_add``, ``assign_sub``, and an optimiser's step, which is made of them) into
one of them between the forward and the backward pass would silently give a wrong gradient.
As in PyTorch, labkit catches it:

- every in-place write advances a process-wide count of writes (``epoch``) and stamps the
  written tensor's *counter* with it, and counts the tensor's version (its number of in-place
  writes, as PyTorch's ``_version``); a view (``reshape``, ``permute``, basic indexing...)
  shares the counter of the tensor it views, so writing through either stamps both;
- each tape entry notes the count when it was recorded; a counter made for an entry's output
  tensor (when it is first written, or viewed) is linked to the entry;
- the backward pass compares: only when some write happened after an entry was recorded does it
  look closer, and raises if the entry's vjp then reads (passes to an op) a value written since.
  A vjp that only needs shapes (``add``'s, ``sum``'s) is not troubled by writes to its inputs.

>>> import labkit as lk
>>> x = lk.tensor([1.0, 2.0], requires_grad=True)
>>> y = x.exp()                  # exp's vjp reads its output
>>> _ = y.add_(1.0)
>>> y._version[1]                # written once
1
>>> y.sum().backward()           # doctest: +ELLIPSIS
Traceback (most recent call last):
...
labkit.errors.GradError: backward through exp: ... modified by an in-place operation ... is at version 1; exp saved version 0...
"""
epoch = [0]      # in-place writes so far, in this process
# Memories that a write gave a history while they needed no gradient, by the id of their version
# counter: {id: (weak reference to the tensor written, the write's epoch)}. Views of them made
# before are regrown when read (``tape.regrow``); an entry goes when the tensor does.
given_grad = {}
_RECENT = 8      # write epochs kept per counter, to tell which version a tape entry saw


def counter_of(tensor):
    """The tensor's version counter (made on first use): ``[epoch of its last in-place write,
    version (writes so far), epochs of the last few writes]``.

    Made for the output of a tape entry, it is linked to the entry, which checks it in the
    backward pass (made lazily, so that ops nobody writes into allocate nothing)."""
    c = getattr(tensor, "_version", None)      # unset until first needed
    if c is None:
        c = tensor._version = [0, 0, []]
        node = tensor._node
        if node is not None and tensor._data is not None and node.out is tensor._data \
                and node.out_version is None:
            node.out_version = c
    return c


def bump(tensor):
    """Record an in-place write into ``tensor`` (and so into every view sharing its counter)."""
    epoch[0] += 1
    c = counter_of(tensor)
    c[0] = epoch[0]
    c[1] += 1
    recent = c[2]
    recent.append(epoch[0])
    if len(recent) > _RECENT:
        del recent[0]


def version_at(counter, when):
    """The version a counter had at write-epoch ``when`` (when a tape entry was recorded)."""
    return counter[1] - sum(1 for e in counter[2] if e > when)


def share_if_view(out_tensor, inputs):
    """Give ``out_tensor`` the counter of the input it is a view of (or is), if any. (Views of
    views have the owning array as their ``base``.)"""
    out = out_tensor._data
    root = out.base if out.base is not None else out
    for a in inputs:
        data = getattr(a, "_data", None)
        if data is not None and (data is out or data is root or data.base is root):
            out_tensor._version = counter_of(a)
            return


def value_key(tensor):
    """What identifies the value a tensor holds, for the backward pass's check of written
    values: its array, or for a symbolic tensor of a trace the graph node it names."""
    data = tensor._data
    return id(data) if data is not None else id(getattr(tensor, "_gnode", tensor))
