"""Host oneDNN: direct convolution kernels, a blocked GEMM, fused LSTM layers, max pooling's
gradient, and one-pass GELU, leaky ReLU, layer normalisation and softmax, for float32 on the CPU,
from Intel's oneDNN.

NumPy has no convolution: labkit's own convolutions are im2col copies and BLAS GEMMs
(``labkit.tensor.ops.conv``), which run narrow layers below the GEMM's peak and pay for the
copies. oneDNN (the library PyTorch's CPU convolutions call) has direct kernels that keep a tile
of outputs in registers over all taps and channels. labkit calls its C API through ctypes, the
way ``host_blas`` calls NumPy's BLAS: the library comes from the ``onednn-cpu-gomp`` wheel
(Apache 2.0), which installs ``libdnnl.so.3`` under the environment's ``lib`` folder and uses
the compiler's OpenMP runtime (its threads follow ``OMP_NUM_THREADS``).

Each call describes NumPy's (N, C, H, W) arrays to oneDNN as they lie in memory, lets the
convolution choose its own blocked layouts, and converts in and out with oneDNN's reorders.
GELU and its gradient (``gelu``, ``gelu_backward``) are oneDNN's eltwise kernels over the
arrays' memory as it is: one pass where NumPy takes about twenty for the float32 erf; so are
``leaky_relu`` and ``leaky_relu_backward`` (one pass where NumPy takes two and three).
``max_pool_backward`` runs its pooling forward, for where each window's maximum is (the
workspace), then its backward.
``layer_norm`` and ``layer_norm_backward`` are its layer normalisation, with or without scale and
shift (the backward runs the forward for the rows' mean and variance first, and gives the
scale's and shift's gradients with the input's), where NumPy takes about seven passes forward
and twelve backward; ``softmax`` and ``softmax_backward`` (``log=True``:
log_softmax) are its softmax over the last dimension, one pass where NumPy takes four.
``matmul`` is its matrix product (``brgemm``), for large products only: on the Xeons measured it
is faster than the OpenBLAS NumPy ships, on small ones the call costs more than it saves.
``lstm`` and ``lstm_backward`` are its fused LSTM layer, the kernels PyTorch's CPU LSTM runs:
the input's projection for every step one GEMM, then per step the hidden state's GEMM and the
gates in one pass, where labkit's NumPy loop takes a dozen passes a step; the forward can keep its
workspace (every step's gates) with its result for the backward, which gives the gradients of
the input, both weights, the bias and the initial state at once.

Primitives are built once per shape and layout and kept (the last ``_CACHE`` of them), with
their memory objects and execute arguments (one set per thread, pointed at each call's arrays),
so that a call costs a few ctypes calls besides the kernel. Every function
returns None where it cannot serve the call (no library, a dtype other than float32, grouped
weights, a failed call), and the caller computes the same values its own way; ``available()``
says whether the library loaded. ``LABKIT_HOST_DNNL=0`` in the environment turns it off.
A process forked after oneDNN has run uses it on one thread (see ``_after_fork``).

>>> import numpy as np
>>> from labkit.devices import host_dnnl
>>> x = np.ones((1, 2, 4, 4), np.float32)
>>> w = np.ones((3, 2, 3, 3), np.float32)
>>> y = host_dnnl.conv2d(x, w, (1, 1), (1, 1), (1, 1))
>>> y is None or y[0, 0].tolist() == [[8.0, 12.0, 12.0, 8.0], [12.0, 18.0, 18.0, 12.0],
...                                  [12.0, 18.0, 18.0, 12.0], [8.0, 12.0, 12.0, 8.0]]
True
"""
import collections
import ctypes
import math
import os
import sys
import threading
import weakref

import numpy as np

_F32 = 3                                  # dnnl_f32
_TAG_ANY = 1                              # dnnl_format_tag_any: the primitive chooses
_FORWARD_TRAINING, _DIRECT = 64, 1        # dnnl_forward_training, dnnl_convolution_direct
_CPU, _SCRATCHPAD_USER = 1, 1
_Q_SRC, _Q_DIFF_SRC, _Q_WEIGHTS, _Q_DIFF_WEIGHTS, _Q_DST, _Q_DIFF_DST, _Q_SCRATCHPAD = \
    129, 130, 131, 132, 133, 134, 136
_Q_IMPL = 8
_ARG_SRC, _ARG_DST, _ARG_WEIGHTS, _ARG_SCRATCHPAD, _ARG_WORKSPACE = 1, 17, 33, 80, 64
_Q_WORKSPACE = 135
_ARG_DIFF_SRC, _ARG_DIFF_DST, _ARG_DIFF_WEIGHTS = 129, 145, 161
_CACHE = 256
_KEPT_SCRATCH = 1 << 20          # a plan keeps a scratchpad up to this size (bytes) per thread

_Dims = ctypes.c_int64 * 12
_vp = ctypes.c_void_p


class _Arg(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_int), ("memory", ctypes.c_void_p)]


_state = {"lib": None, "engine": None, "where": None}
_plans = collections.OrderedDict()
_lock = threading.Lock()
_local = threading.local()


def _candidate_paths():
    names = ("libdnnl.so.3", "libdnnl.so")
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        for name in names:
            yield os.path.join(prefix, "lib", name)
    yield from names            # the loader's own search path


def _declare(lib):
    p = ctypes.POINTER
    sigs = {
        "dnnl_engine_create": [p(_vp), ctypes.c_int, ctypes.c_size_t],
        "dnnl_stream_create": [p(_vp), _vp, ctypes.c_uint],
        "dnnl_memory_desc_create_with_strides": [p(_vp), ctypes.c_int, _Dims, ctypes.c_int,
                                                 _Dims],
        "dnnl_memory_desc_create_with_tag": [p(_vp), ctypes.c_int, _Dims, ctypes.c_int,
                                             ctypes.c_int],
        "dnnl_memory_desc_destroy": [_vp],
        "dnnl_memory_desc_equal": [_vp, _vp],
        "dnnl_memory_desc_get_size": [_vp],
        "dnnl_primitive_attr_create": [p(_vp)],
        "dnnl_primitive_attr_set_scratchpad_mode": [_vp, ctypes.c_int],
        "dnnl_convolution_forward_primitive_desc_create": [
            p(_vp), _vp, ctypes.c_int, ctypes.c_int, _vp, _vp, _vp, _vp, _Dims, _Dims, _Dims,
            _Dims, _vp],
        "dnnl_convolution_backward_data_primitive_desc_create": [
            p(_vp), _vp, ctypes.c_int, _vp, _vp, _vp, _Dims, _Dims, _Dims, _Dims, _vp, _vp],
        "dnnl_convolution_backward_weights_primitive_desc_create": [
            p(_vp), _vp, ctypes.c_int, _vp, _vp, _vp, _vp, _Dims, _Dims, _Dims, _Dims, _vp,
            _vp],
        "dnnl_eltwise_forward_primitive_desc_create": [
            p(_vp), _vp, ctypes.c_int, ctypes.c_int, _vp, _vp, ctypes.c_float, ctypes.c_float,
            _vp],
        "dnnl_eltwise_backward_primitive_desc_create": [
            p(_vp), _vp, ctypes.c_int, _vp, _vp, _vp, ctypes.c_float, ctypes.c_float, _vp, _vp],
        "dnnl_layer_normalization_forward_primitive_desc_create": [
            p(_vp), _vp, ctypes.c_int, _vp, _vp, _vp, ctypes.c_float, ctypes.c_uint, _vp],
        "dnnl_layer_normalization_backward_primitive_desc_create": [
            p(_vp), _vp, ctypes.c_int, _vp, _vp, _vp, _vp, ctypes.c_float, ctypes.c_uint, _vp,
            _vp],
        "dnnl_softmax_forward_primitive_desc_create": [
            p(_vp), _vp, ctypes.c_int, ctypes.c_int, _vp, _vp, ctypes.c_int, _vp],
        "dnnl_softmax_backward_primitive_desc_create": [
            p(_vp), _vp, ctypes.c_int, _vp, _vp, _vp, ctypes.c_int, _vp, _vp],
        "dnnl_pooling_forward_primitive_desc_create": [
            p(_vp), _vp, ctypes.c_int, ctypes.c_int, _vp, _vp, _Dims, _Dims, _Dims, _Dims, _Dims,
            _vp],
        "dnnl_pooling_backward_primitive_desc_create": [
            p(_vp), _vp, ctypes.c_int, _vp, _vp, _Dims, _Dims, _Dims, _Dims, _Dims, _vp, _vp],
        "dnnl_lstm_forward_primitive_desc_create": [
            p(_vp), _vp, ctypes.c_int, ctypes.c_int] + [_vp] * 11 + [ctypes.c_uint, _vp],
        "dnnl_lstm_backward_primitive_desc_create": [
            p(_vp), _vp, ctypes.c_int, ctypes.c_int] + [_vp] * 22 + [ctypes.c_uint, _vp, _vp],
        "dnnl_reorder_primitive_desc_create": [p(_vp), _vp, _vp, _vp, _vp, _vp],
        "dnnl_primitive_desc_query_md": [_vp, ctypes.c_int, ctypes.c_int],
        "dnnl_primitive_desc_query": [_vp, ctypes.c_int, ctypes.c_int, _vp],
        "dnnl_primitive_desc_destroy": [_vp],
        "dnnl_primitive_create": [p(_vp), _vp],
        "dnnl_primitive_destroy": [_vp],
        "dnnl_primitive_execute": [_vp, _vp, ctypes.c_int, p(_Arg)],
        "dnnl_memory_create": [p(_vp), _vp, _vp, _vp],
        "dnnl_memory_destroy": [_vp],
        "dnnl_memory_set_data_handle": [_vp, _vp],
    }
    for name, args in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = ctypes.c_int
    lib.dnnl_primitive_desc_query_md.restype = _vp
    lib.dnnl_memory_desc_get_size.restype = ctypes.c_size_t


def _load():
    """The library and its CPU engine, bound once; (None, None) where it is absent or off."""
    if _state["where"] is not None:
        return _state["lib"], _state["engine"]
    _state["where"] = ""
    if os.environ.get("LABKIT_HOST_DNNL", "1") == "0" or not sys.platform.startswith("linux"):
        return None, None
    for path in _candidate_paths():
        try:
            lib = ctypes.CDLL(path)
            _declare(lib)
        except (OSError, AttributeError):
            continue
        engine = _vp()
        if lib.dnnl_engine_create(ctypes.byref(engine), _CPU, 0) != 0:
            continue
        _state.update(lib=lib, engine=engine, where=os.path.basename(path))
        if not _agrees():
            _state.update(lib=None, engine=None, where="")
            _plans.clear()
            return None, None
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_after_fork)
        return lib, engine
    return None, None


def _agrees():
    """Whether a small convolution and its two gradients through oneDNN match NumPy's sums."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 2)).astype(np.float32)
    windows = np.lib.stride_tricks.sliding_window_view(
        np.pad(x, ((0, 0), (0, 0), (1, 1), (0, 0))), (3, 2), axis=(2, 3))[:, :, ::2]
    want = np.einsum("nchwij,ocij->nohw", windows, w)
    y = conv2d(x, w, (2, 1), (1, 0), (1, 1))
    if y is None or y.shape != want.shape or not np.allclose(y, want, rtol=1e-4, atol=1e-4):
        return False
    g = rng.standard_normal(y.shape).astype(np.float32)
    dw = conv2d_weight_grad(g, x, w.shape, (2, 1), (1, 0), (1, 1))
    dx = conv2d_input_grad(g, w, x.shape, (2, 1), (1, 0), (1, 1))
    # <g, conv(x, w)> is linear in each: its gradients are the two adjoints
    return dw is not None and dx is not None and \
        np.allclose(dw, np.einsum("nohw,nchwij->ocij", g, windows), rtol=1e-4, atol=1e-4) and \
        np.isclose(np.vdot(dx, x), np.vdot(g, want), rtol=1e-4)


def _after_fork():
    """In a forked child: one OpenMP thread, and primitives made anew. GNU OpenMP cannot start
    threads again in a child of a process whose pool had started (its parallel regions would
    wait for threads that were not copied), and a primitive keeps the thread count it was made
    with. So a forked worker (a data loader's, say) runs oneDNN on one thread."""
    global _lock
    _lock = threading.Lock()        # another thread may have held it at the fork
    _plans.clear()
    _local.__dict__.clear()
    set_threads = getattr(_state["lib"], "omp_set_num_threads", None)
    if set_threads is not None:
        set_threads(1)


def threads():
    """How many OpenMP threads oneDNN's kernels would run on (``OMP_NUM_THREADS``, or
    ``threadpoolctl``'s limit), or None where the library is not loaded.

    >>> from labkit.devices import host_dnnl
    >>> host_dnnl.threads() is None or host_dnnl.threads() >= 1
    True
    """
    lib, _ = _load()
    get = getattr(lib, "omp_get_max_threads", None) if lib is not None else None
    return get() if get is not None else None


def serves(xp, *arrays):
    """Whether labkit's kernels ask oneDNN first for arrays of the array module ``xp``: NumPy's,
    while OpenMP runs one thread. At more, oneDNN's OpenMP pool and NumPy's OpenBLAS pool fight
    over the cores (a BLAS worker spins for a while after each threaded product), and labkit's
    own NumPy routes with BLAS threads are faster (``labkit.tensor.ops.conv`` has the numbers).
    Given ``arrays``, only where they are all float32: looked at before the library is loaded,
    so that a program of other dtypes never loads it (about 17 MB).

    >>> import numpy as np
    >>> from labkit.devices import host_dnnl
    >>> host_dnnl.serves(np) == (host_dnnl.threads() == 1)
    True
    >>> host_dnnl.serves(np, np.ones(3))        # float64
    False
    """
    return xp is np and all(a.dtype == np.float32 for a in arrays) and threads() == 1


def available():
    """The oneDNN library's file name, or None where labkit's own kernels do all the work.

    >>> from labkit.devices import host_dnnl
    >>> host_dnnl.available() is None or "dnnl" in host_dnnl.available()
    True
    """
    _load()
    return _state["where"] or None


def _stream():
    lib, engine = _load()
    stream = getattr(_local, "stream", None)
    if stream is None:            # one stream a thread: a stream is not shared between threads
        stream = _vp()
        if lib.dnnl_stream_create(ctypes.byref(stream), engine, 1) != 0:
            raise RuntimeError("oneDNN could not create a CPU stream")
        _local.stream = stream
    return stream


class _Failed(Exception):
    pass


def _check(status, what):
    if status != 0:
        raise _Failed(f"{what}: oneDNN status {status}")


class _Plan:
    """One primitive, the reorders between NumPy's layouts and the ones it chose, and the
    descriptors they were made from (destroyed with the plan)."""

    def __init__(self, lib, engine, make, user, roles, choose=True, extra=()):
        """``make(attr, mds)`` creates the primitive descriptor from ``mds`` (the operands'
        descriptors with any layout where ``choose``, else NumPy's); ``user`` the operands'
        NumPy descriptors; ``roles`` [(exec arg, query)] of the operands, in ``user``'s order
        (without ``choose`` the operands are used as they lie, and the queries are not asked:
        then any of them may be an output). ``extra`` [(exec arg, query)]: operands in a layout
        only the primitive knows (an RNN's workspace), whose byte buffers the caller passes
        after the arrays (``extra_sizes`` says how large)."""
        self.lib, self.handles = lib, []
        self.memories, self.local = [], threading.local()     # every thread's memory objects
        attr = self._own(_vp(), "dnnl_primitive_attr_destroy")
        _check(lib.dnnl_primitive_attr_create(ctypes.byref(attr)), "attr")
        _check(lib.dnnl_primitive_attr_set_scratchpad_mode(attr, _SCRATCHPAD_USER), "attr")
        self.user = [self._md(dims, strides) for dims, strides in user]
        anys = [self._md(dims, None) for dims, _ in user] if choose else self.user
        self.pd = self._own(_vp(), "dnnl_primitive_desc_destroy")
        _check(make(ctypes.byref(self.pd), attr, anys), "primitive descriptor")
        self.prim = self._own(_vp(), "dnnl_primitive_destroy")
        _check(lib.dnnl_primitive_create(ctypes.byref(self.prim), self.pd), "primitive")
        self.args = [a for a, _ in roles]
        self.mds = [_vp(lib.dnnl_primitive_desc_query_md(self.pd, q, 0)) for _, q in roles] \
            if choose else self.user
        self.sizes = [lib.dnnl_memory_desc_get_size(m) for m in self.mds]
        self.scratch_md = _vp(lib.dnnl_primitive_desc_query_md(self.pd, _Q_SCRATCHPAD, 0))
        self.scratch = lib.dnnl_memory_desc_get_size(self.scratch_md)
        # a reorder per operand whose chosen layout is not NumPy's: into it for inputs (all but
        # the last operand), out of it for the output
        self.reorders = []
        for i, (u, m) in enumerate(zip(self.user, self.mds)):
            if lib.dnnl_memory_desc_equal(u, m):
                self.reorders.append(None)
                continue
            src, dst = (u, m) if i < len(self.mds) - 1 else (m, u)
            rpd = self._own(_vp(), "dnnl_primitive_desc_destroy")
            _check(lib.dnnl_reorder_primitive_desc_create(ctypes.byref(rpd), src, engine, dst,
                                                          engine, None), "reorder")
            rprim = self._own(_vp(), "dnnl_primitive_destroy")
            _check(lib.dnnl_primitive_create(ctypes.byref(rprim), rpd), "reorder")
            self.reorders.append((rprim, src, dst))
        self.args += [a for a, _ in extra]
        self.mds = list(self.mds) + [_vp(lib.dnnl_primitive_desc_query_md(self.pd, q, 0))
                                     for _, q in extra]
        self.extra_sizes = [lib.dnnl_memory_desc_get_size(m) for m in self.mds[len(roles):]]
        self.sizes += self.extra_sizes
        self.reorders += [None] * len(extra)
        self.engine = engine

    def _own(self, handle, destroy):
        self.handles.append((handle, destroy))
        return handle

    def _md(self, dims, strides):
        md = self._own(_vp(), "dnnl_memory_desc_destroy")
        if strides is None:
            _check(self.lib.dnnl_memory_desc_create_with_tag(ctypes.byref(md), len(dims),
                                                             _Dims(*dims), _F32, _TAG_ANY), "md")
        else:
            _check(self.lib.dnnl_memory_desc_create_with_strides(
                ctypes.byref(md), len(dims), _Dims(*dims), _F32, _Dims(*strides)), "md")
        return md

    def __del__(self):
        for memory in self.memories:
            self.lib.dnnl_memory_destroy(memory)
        for handle, destroy in reversed(self.handles):
            if handle:
                getattr(self.lib, destroy)(handle)

    def _memory(self, slot, md, array):
        """This thread's memory object for ``slot`` (made on the thread's first call: a memory
        object is not shared between threads), pointed at ``array``."""
        memories = getattr(self.local, "memories", None)
        if memories is None:
            memories = self.local.memories = {}
        memory = memories.get(slot)
        if memory is None:
            memory = _vp()
            _check(self.lib.dnnl_memory_create(ctypes.byref(memory), md, self.engine, None),
                   "memory")
            self.memories.append(memory)
            memories[slot] = memory
        _check(self.lib.dnnl_memory_set_data_handle(
            memory, _vp(array.__array_interface__["data"][0])), "memory")
        return memory

    def _execute(self, prim, stream, pairs):
        args = (_Arg * len(pairs))(*[_Arg(a, m) for a, m in pairs])
        _check(self.lib.dnnl_primitive_execute(prim, stream, len(pairs), args), "execute")

    def _direct(self):
        """This thread's way to run a plan without reorders: its memory objects and the
        execute arguments made once, and a scratchpad kept where it is small."""
        stream = _stream()
        placeholder = np.empty(1, np.float32)
        memories = [self._memory(i, md, placeholder) for i, md in enumerate(self.mds)]
        scratch = np.empty(max(self.scratch, 1), np.uint8) if self.scratch <= _KEPT_SCRATCH \
            else None
        scratch_memory = self._memory("scratchpad", self.scratch_md,
                                      placeholder if scratch is None else scratch)
        pairs = list(zip(self.args, memories)) + [(_ARG_SCRATCHPAD, scratch_memory)]
        args = (_Arg * len(pairs))(*[_Arg(a, m) for a, m in pairs])
        return stream, memories, scratch, scratch_memory, args

    def __call__(self, arrays):
        """Runs the primitive on ``arrays`` (NumPy operands in ``user``'s order, the output last
        and written, then any ``extra`` buffers)."""
        if not any(self.reorders):
            direct = getattr(self.local, "direct", None)
            if direct is None:
                direct = self.local.direct = self._direct()
            stream, memories, scratch, scratch_memory, args = direct
            set_handle = self.lib.dnnl_memory_set_data_handle
            for memory, array in zip(memories, arrays):
                set_handle(memory, array.__array_interface__["data"][0])
            if scratch is None:             # a large one: alive until the primitive has run
                scratch = np.empty(self.scratch, np.uint8)
                set_handle(scratch_memory, scratch.__array_interface__["data"][0])
            _check(self.lib.dnnl_primitive_execute(self.prim, stream, len(args), args),
                   "execute")
            return
        stream, pairs, outputs = _stream(), [], []
        buffers = []                # alive until the primitives have run
        for i, (array, md, size, reorder) in enumerate(
                zip(arrays, self.mds, self.sizes, self.reorders)):
            if reorder is None:
                pairs.append((self.args[i], self._memory(i, md, array)))
                continue
            rprim, src, dst = reorder
            buffers.append(np.empty(size, np.uint8))
            mine = self._memory(i, md, buffers[-1])
            output = i == len(arrays) - 1
            theirs = self._memory((i, "as given"), dst if output else src, array)
            if output:
                outputs.append((rprim, mine, theirs))
            else:
                self._execute(rprim, stream, [(_ARG_SRC, theirs), (_ARG_DST, mine)])
            pairs.append((self.args[i], mine))
        scratch = np.empty(max(self.scratch, 1), np.uint8)
        pairs.append((_ARG_SCRATCHPAD, self._memory("scratchpad", self.scratch_md, scratch)))
        self._execute(self.prim, stream, pairs)
        for rprim, mine, theirs in outputs:
            self._execute(rprim, stream, [(_ARG_SRC, mine), (_ARG_DST, theirs)])

    def implementation(self):
        name = ctypes.c_char_p()
        self.lib.dnnl_primitive_desc_query(self.pd, _Q_IMPL, 0, ctypes.byref(name))
        return name.value.decode()


def _layout(a):
    """(dims, strides in elements) of a float32 NumPy array oneDNN can read as it lies."""
    if any(s < 0 or s % 4 for s in a.strides):
        return None
    return tuple(a.shape), tuple(s // 4 for s in a.strides)


def _plan(key, make, user, roles, choose=True, fast_only=False, extra=()):
    lib, engine = _load()
    if lib is None:
        return None
    with _lock:
        plan = _plans.get(key)
        if plan is not None:
            _plans.move_to_end(key)
            return plan
    try:
        plan = _Plan(lib, engine, lambda pd, attr, mds: make(lib, engine, pd, attr, mds),
                     user, roles, choose, extra)
        if fast_only and plan.implementation().startswith(("ref", "gemm")):
            plan = False        # oneDNN's reference loops or its own GEMM: NumPy's BLAS wins
    except _Failed:
        plan = False            # remembered: the library does not serve this case
    with _lock:
        _plans[key] = plan
        while len(_plans) > _CACHE:
            _plans.popitem(last=False)
    return plan


def _geometry(stride, padding, dilation, image, kernel, out):
    """oneDNN's strides, dilations (0 for none) and left/right paddings; the right padding
    is what makes the output size exact (NumPy's floor division may leave rows unread)."""
    right = [(o - 1) * s + (k - 1) * d + 1 - i - p
             for o, s, k, d, i, p in zip(out, stride, kernel, dilation, image, padding)]
    return (_Dims(*stride), _Dims(*(d - 1 for d in dilation)), _Dims(*padding), _Dims(*right))


def _usable(*arrays):
    return all(type(a) is np.ndarray and a.dtype == np.float32 and a.ndim == 4 and a.size
               for a in arrays)


def _run(kind, operands, out_shape, geometry, make, roles, choose=True):
    """The primitive that ``make`` describes run on ``operands`` (copied first where oneDNN
    cannot read one as it lies) into a new (``out_shape``) array; None where it did not run."""
    if any(_layout(a) is None for a in operands):
        operands = [np.ascontiguousarray(a) for a in operands]
    out = np.empty(out_shape, np.float32)
    return out if _run_into(kind, list(operands) + [out], geometry, make, roles, choose) else None


def _plan_for(kind, arrays, geometry, make, roles, choose=True, fast_only=False, extra=()):
    """The plan of the primitive that ``make`` describes for ``arrays`` (as they lie,
    ``_layout``), made on the first call with their shapes and strides; falsy where oneDNN does
    not serve them (``fast_only``: where it would run its reference or plain GEMM
    implementation)."""
    key = (kind, tuple([(a.shape, a.strides) for a in arrays]), geometry)
    with _lock:
        plan = _plans.get(key)
        if plan is not None:
            _plans.move_to_end(key)
    if plan is None:
        user = [_layout(a) for a in arrays]
        plan = None if None in user else _plan(key, make, user, roles, choose, fast_only, extra)
    return plan


def _run_into(kind, arrays, geometry, make, roles, choose=True, fast_only=False):
    """Runs the primitive that ``make`` describes on ``arrays`` (``_plan_for``); whether it
    did."""
    plan = _plan_for(kind, arrays, geometry, make, roles, choose, fast_only)
    if not plan:
        return False
    try:
        plan(arrays)
    except _Failed:
        return False
    return True


def conv2d(x, w, stride, padding, dilation):
    """``x`` (N, C, H, W) correlated with ``w`` (O, C, kh, kw), float32, one group: the
    (N, O, OH, OW) output, or None where oneDNN does not serve the call."""
    if not _usable(x, w) or x.shape[1] != w.shape[1]:
        return None
    out = tuple(_out(*a) for a in zip(x.shape[2:], w.shape[2:], stride, padding, dilation))
    if min(out) <= 0:
        return None
    geo = _geometry(stride, padding, dilation, x.shape[2:], w.shape[2:], out)

    def make(lib, engine, pd, attr, mds):
        return _conv_forward(lib, engine, pd, mds[0], mds[1], mds[2], geo, attr)
    return _run("forward", (x, w), (x.shape[0], w.shape[0]) + out,
                (stride, padding, dilation), make,
                [(_ARG_SRC, _Q_SRC), (_ARG_WEIGHTS, _Q_WEIGHTS), (_ARG_DST, _Q_DST)])


def _out(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _conv_forward(lib, engine, pd, src, weights, dst, geo, attr):
    return lib.dnnl_convolution_forward_primitive_desc_create(
        pd, engine, _FORWARD_TRAINING, _DIRECT, src, weights, None, dst, *geo, attr)


def _against_forward(lib, forward, backward):
    """A backward primitive descriptor, ``backward(hint)``, made against the forward one that
    ``forward(pointer)`` creates (oneDNN asks for it; it is destroyed after)."""
    hint = _vp()
    _check(forward(ctypes.byref(hint)), "forward hint")
    try:
        return backward(hint)
    finally:
        lib.dnnl_primitive_desc_destroy(hint)


def conv2d_input_grad(g, w, image_shape, stride, padding, dilation):
    """The gradient of ``conv2d`` with respect to its input: ``g`` (N, O, OH, OW) through
    ``w`` (O, C, kh, kw) into an image of ``image_shape``; None where oneDNN does not serve."""
    if not _usable(g, w) or len(image_shape) != 4 or image_shape[1] != w.shape[1]:
        return None
    geo = _geometry(stride, padding, dilation, image_shape[2:], w.shape[2:], g.shape[2:])

    def make(lib, engine, pd, attr, mds):
        return _against_forward(
            lib, lambda hint: _conv_forward(lib, engine, hint, mds[2], mds[1], mds[0], geo, attr),
            lambda hint: lib.dnnl_convolution_backward_data_primitive_desc_create(
                pd, engine, _DIRECT, mds[2], mds[1], mds[0], *geo, hint, attr))
    return _run("input_grad", (g, w), tuple(image_shape), (stride, padding, dilation), make,
                [(_ARG_DIFF_DST, _Q_DIFF_DST), (_ARG_WEIGHTS, _Q_WEIGHTS),
                 (_ARG_DIFF_SRC, _Q_DIFF_SRC)])


def conv2d_weight_grad(g, x, weight_shape, stride, padding, dilation):
    """The gradient of ``conv2d`` with respect to its weight: ``g`` (N, O, OH, OW) against the
    input ``x`` (N, C, H, W), a (O, C, kh, kw) array; None where oneDNN does not serve."""
    if not _usable(g, x) or len(weight_shape) != 4 or weight_shape[1] != x.shape[1]:
        return None
    geo = _geometry(stride, padding, dilation, x.shape[2:], weight_shape[2:], g.shape[2:])

    def make(lib, engine, pd, attr, mds):
        return _against_forward(
            lib, lambda hint: _conv_forward(lib, engine, hint, mds[1], mds[2], mds[0], geo, attr),
            lambda hint: lib.dnnl_convolution_backward_weights_primitive_desc_create(
                pd, engine, _DIRECT, mds[1], mds[2], None, mds[0], *geo, hint, attr))
    return _run("weight_grad", (g, x), tuple(weight_shape), (stride, padding, dilation), make,
                [(_ARG_DIFF_DST, _Q_DIFF_DST), (_ARG_SRC, _Q_SRC),
                 (_ARG_DIFF_WEIGHTS, _Q_DIFF_WEIGHTS)])


# ---- matrix products ---------------------------------------------------------------------------
MATMUL_MIN = 3 << 20                    # m * k * n below which the call costs more than it saves


def matmul(a, b, out=None):
    """``a`` (m, k) @ ``b`` (k, n) of float32 NumPy matrices as they lie (either may be a
    transposed view), with oneDNN's blocked GEMM kernel (``brgemm``), into ``out`` (a new array
    where None): the product, or None where oneDNN does not serve (another dtype or rank, a
    product under ``MATMUL_MIN`` multiply-adds, a layout only its slower kernels take).

    On an Intel Xeon (Ice Lake), at one thread, a linear layer's (768, 512) @ (512, 128) takes
    0.75-0.89 ms here against 0.94-1.15 ms in NumPy's OpenBLAS (PyTorch's MKL: 0.66-0.83), and
    (64, 9216) @ (9216, 128) 0.6x OpenBLAS's time; products of transposed activations (weight
    gradients) take the same time in both. The call costs about 30 us more than NumPy's, about
    what OpenBLAS gains on 3M multiply-adds."""
    if not (type(a) is np.ndarray and type(b) is np.ndarray and a.dtype == np.float32 and
            b.dtype == np.float32 and a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0]):
        return None
    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    if m * k * n < MATMUL_MIN:
        return None
    if out is None:
        out = np.empty((m, n), np.float32)
    elif out.shape != (m, n) or out.dtype != np.float32:
        return None

    def make(lib, engine, pd, attr, mds):
        return lib.dnnl_matmul_primitive_desc_create(pd, engine, mds[0], mds[1], None, mds[2],
                                                     attr)
    done = _run_into("matmul", [a, b, out], (), make,
                     [(_ARG_SRC, 0), (_ARG_WEIGHTS, 0), (_ARG_DST, 0)], choose=False,
                     fast_only=True)
    return out if done else None


# ---- elementwise: GELU and leaky ReLU ------------------------------------------------------------
_GELU_ERF, _RELU = 49, 0x20               # dnnl_eltwise_gelu_erf, dnnl_eltwise_relu
ELEMENTWISE_MIN = 1 << 14                 # below this NumPy's passes cost less than the call


def _flat(*arrays):
    """The arrays as 1-d C-contiguous float32 arrays, where they are NumPy float32 arrays of one
    shape with at least ``ELEMENTWISE_MIN`` elements; else None."""
    if not all(type(a) is np.ndarray and a.dtype == np.float32 and a.shape == arrays[0].shape
               for a in arrays) or arrays[0].size < ELEMENTWISE_MIN:
        return None
    return [np.ascontiguousarray(a).reshape(-1) for a in arrays]


def _eltwise_forward(lib, engine, pd, alg, alpha, src, dst, attr):
    return lib.dnnl_eltwise_forward_primitive_desc_create(
        pd, engine, _FORWARD_TRAINING, alg, src, dst, alpha, 0.0, attr)


def _eltwise(kind, alg, alpha, x):
    """oneDNN's eltwise ``alg`` (parameter ``alpha``) of a float32 array in one pass: a new
    array, or None where it does not serve."""
    flat = _flat(x)
    if flat is None:
        return None

    def make(lib, engine, pd, attr, mds):
        return _eltwise_forward(lib, engine, pd, alg, alpha, mds[0], mds[1], attr)
    out = _run(kind, flat, flat[0].shape, (alpha,), make,
               [(_ARG_SRC, _Q_SRC), (_ARG_DST, _Q_DST)], choose=False)
    return None if out is None else out.reshape(x.shape)


def _eltwise_backward(kind, alg, alpha, g, x):
    """``g`` times the derivative of ``_eltwise``'s function at ``x`` (float32, one shape), in
    one pass; None where oneDNN does not serve."""
    flat = _flat(g, x)
    if flat is None:
        return None

    def make(lib, engine, pd, attr, mds):
        return _against_forward(
            lib, lambda hint: _eltwise_forward(lib, engine, hint, alg, alpha, mds[1], mds[1],
                                               attr),
            lambda hint: lib.dnnl_eltwise_backward_primitive_desc_create(
                pd, engine, alg, mds[2], mds[0], mds[1], alpha, 0.0, hint, attr))
    out = _run(kind, flat, flat[0].shape, (alpha,), make,
               [(_ARG_DIFF_DST, _Q_DIFF_DST), (_ARG_SRC, _Q_SRC), (_ARG_DIFF_SRC, _Q_DIFF_SRC)],
               choose=False)
    return None if out is None else out.reshape(x.shape)


def gelu(x):
    """``x * Phi(x)`` (GELU without approximation) of a float32 array, in one pass: a new array,
    or None where oneDNN does not serve (another dtype, fewer than ``ELEMENTWISE_MIN``
    elements)."""
    return _eltwise("gelu", _GELU_ERF, 0.0, x)


def gelu_backward(g, x):
    """``g * gelu'(x)`` for float32 ``g`` and ``x`` of one shape, in one pass; None where oneDNN
    does not serve."""
    return _eltwise_backward("gelu_backward", _GELU_ERF, 0.0, g, x)


def leaky_relu(x, negative_slope):
    """``x`` where ``x > 0``, else ``negative_slope * x`` (NaN stays NaN), of a float32 array in
    one pass: a new array, or None where oneDNN does not serve."""
    return _eltwise("leaky_relu", _RELU, negative_slope, x)


def leaky_relu_backward(g, x, negative_slope):
    """``g`` where ``x > 0``, else ``negative_slope * g`` (float32, one shape), in one pass; None
    where oneDNN does not serve."""
    return _eltwise_backward("leaky_relu_backward", _RELU, negative_slope, g, x)


# ---- layer normalisation -----------------------------------------------------------------------
_FORWARD_INFERENCE, _BACKWARD_DATA, _BACKWARD = 96, 160, 128  # dnnl_forward_inference, ...
_ARG_MEAN, _ARG_VARIANCE = 49, 50
_USE_SCALE, _USE_SHIFT = 0x2, 0x4                              # dnnl_use_scale, dnnl_use_shift
_ARG_SCALE, _ARG_SHIFT, _ARG_DIFF_SCALE, _ARG_DIFF_SHIFT = 51, 52, 255, 256


def _rows(ndim, *arrays):
    """The arrays as C-contiguous float32 (rows, n) matrices, n the size of their last ``ndim``
    dimensions, where they are NumPy float32 arrays of one shape with at least
    ``ELEMENTWISE_MIN`` elements; else None."""
    flat = _flat(*arrays)
    if flat is None or not 1 <= ndim <= arrays[0].ndim:
        return None
    n = math.prod(arrays[0].shape[arrays[0].ndim - ndim:])
    return [a.reshape(-1, n) for a in flat] if n else None


def _vectors(n, *params):
    """The affine parameters that are given, as contiguous float32 vectors of ``n`` elements;
    None where one is not a NumPy float32 array of that size."""
    out = []
    for p in params:
        if p is None:
            continue
        if type(p) is not np.ndarray or p.dtype != np.float32 or p.size != n:
            return None
        out.append(np.ascontiguousarray(p).reshape(n))
    return out


def _lnorm_flags(weight, bias):
    return (_USE_SCALE if weight is not None else 0) | (_USE_SHIFT if bias is not None else 0)


def _lnorm_forward(lib, engine, pd, prop, src, dst, stat, eps, attr, flags=0):
    return lib.dnnl_layer_normalization_forward_primitive_desc_create(
        pd, engine, prop, src, dst, stat, eps, flags, attr)


def layer_norm(x, ndim, eps, weight=None, bias=None):
    """``(x - mean) / sqrt(var + eps)`` over the last ``ndim`` dimensions of a float32 array
    (biased variance), times ``weight`` and plus ``bias`` where given (each of the normalised
    dimensions' size), in one kernel: a new array, or None where oneDNN does not serve (another
    dtype, fewer than ``ELEMENTWISE_MIN`` elements)."""
    rows = _rows(ndim, x)
    params = None if rows is None else _vectors(rows[0].shape[1], weight, bias)
    if params is None:
        return None
    flags = _lnorm_flags(weight, bias)
    roles = [(_ARG_SRC, 0)] + [(_ARG_SCALE, 0)] * (weight is not None) + \
        [(_ARG_SHIFT, 0)] * (bias is not None) + [(_ARG_DST, 0)]

    def make(lib, engine, pd, attr, mds):
        return _lnorm_forward(lib, engine, pd, _FORWARD_INFERENCE, mds[0], mds[-1], None, eps,
                              attr, flags)
    out = _run("layer_norm", rows + params, rows[0].shape, (eps, flags), make, roles,
               choose=False)
    return None if out is None else out.reshape(x.shape)


def layer_norm_backward(g, x, ndim, eps, weight=None, bias=False):
    """The gradient through ``layer_norm(x)`` of ``g`` (float32, one shape): oneDNN's forward
    for the rows' mean and variance, then its backward. With ``weight`` (the forward's scale),
    one flat array of the gradients of x, of the weight and (``bias``) of the bias, in that
    order; without, the gradient of x in x's shape. None where oneDNN does not serve."""
    rows = _rows(ndim, g, x)
    params = None if rows is None or (bias and weight is None) else \
        _vectors(rows[0].shape[1], weight)
    if params is None:
        return None
    shape = x.shape
    g, x = rows
    r, n = x.shape
    flags = _lnorm_flags(weight, True if bias else None)
    packed = np.empty(r * n + n * bin(flags).count("1"), np.float32)
    dx = packed[:r * n].reshape(r, n)      # the statistics' forward writes here first
    grads = [packed[r * n + i * n:r * n + (i + 1) * n] for i in range(len(packed) // n - r)]
    mean, var = np.empty(r, np.float32), np.empty(r, np.float32)

    def forward(lib, engine, pd, attr, mds):
        return _lnorm_forward(lib, engine, pd, _FORWARD_TRAINING, mds[0], mds[3], mds[1], eps,
                              attr)

    def backward(lib, engine, pd, attr, mds):
        return _against_forward(
            lib, lambda hint: _lnorm_forward(lib, engine, hint, _FORWARD_TRAINING, mds[0],
                                             mds[0], mds[1], eps, attr, flags),
            lambda hint: lib.dnnl_layer_normalization_backward_primitive_desc_create(
                pd, engine, _BACKWARD if flags else _BACKWARD_DATA, mds[4], mds[3], mds[0],
                mds[1], eps, flags, hint, attr))
    roles = [(_ARG_SRC, 0), (_ARG_MEAN, 0), (_ARG_VARIANCE, 0)]
    # with a shift, oneDNN's backward asks for it though the gradients do not depend on it:
    # it is handed the weight, which it does not read
    shift = [(_ARG_SHIFT, 0)] if bias else []
    params = params * (1 + bool(bias))
    if not _run_into("layer_norm_statistics", [x, mean, var, dx], (eps,), forward,
                     roles + [(_ARG_DST, 0)], choose=False) or \
            not _run_into("layer_norm_backward", [x, mean, var, g, dx] + params + grads,
                          (eps, flags), backward,
                          roles + [(_ARG_DIFF_DST, 0), (_ARG_DIFF_SRC, 0)] + shift +
                          [(_ARG_SCALE, 0)] * bool(params) +
                          [(_ARG_DIFF_SCALE, 0), (_ARG_DIFF_SHIFT, 0)][:len(grads)],
                          choose=False):
        return None
    return packed if weight is not None else dx.reshape(shape)


# ---- softmax -----------------------------------------------------------------------------------
_SOFTMAX, _LOG_SOFTMAX = 196608, 196609          # dnnl_softmax_accurate, dnnl_softmax_log


def _softmax_forward(lib, engine, pd, alg, src, dst, attr):
    return lib.dnnl_softmax_forward_primitive_desc_create(pd, engine, _FORWARD_TRAINING, alg, src,
                                                          dst, 1, attr)


def softmax(x, log=False):
    """softmax (``log``: log_softmax) over the last dimension of a float32 array, in one kernel:
    a new array, or None where oneDNN does not serve (another dtype, fewer than
    ``ELEMENTWISE_MIN`` elements)."""
    rows = _rows(1, x)
    if rows is None:
        return None
    alg = _LOG_SOFTMAX if log else _SOFTMAX

    def make(lib, engine, pd, attr, mds):
        return _softmax_forward(lib, engine, pd, alg, mds[0], mds[1], attr)
    out = _run("softmax", rows, rows[0].shape, (alg,), make,
               [(_ARG_SRC, _Q_SRC), (_ARG_DST, _Q_DST)], choose=False)
    return None if out is None else out.reshape(x.shape)


def softmax_backward(g, out, log=False):
    """The gradient through ``softmax`` (``log``: log_softmax) over the last dimension, from
    its result ``out`` and the cotangent ``g`` (float32, one shape), in one kernel; None where
    oneDNN does not serve."""
    rows = _rows(1, g, out)
    if rows is None:
        return None
    alg = _LOG_SOFTMAX if log else _SOFTMAX

    def make(lib, engine, pd, attr, mds):
        return _against_forward(
            lib, lambda hint: _softmax_forward(lib, engine, hint, alg, mds[1], mds[1], attr),
            lambda hint: lib.dnnl_softmax_backward_primitive_desc_create(
                pd, engine, alg, mds[2], mds[0], mds[1], 1, hint, attr))
    dx = _run("softmax_backward", rows, rows[0].shape, (alg,), make,
              [(_ARG_DIFF_DST, _Q_DIFF_DST), (_ARG_DST, _Q_DST), (_ARG_DIFF_SRC, _Q_DIFF_SRC)],
              choose=False)
    return None if dx is None else dx.reshape(out.shape)


# ---- LSTM layers -------------------------------------------------------------------------------
_LEFT_TO_RIGHT, _OVERWRITE = 1, 1     # dnnl_unidirectional_left2right, ..._diff_weights_overwrite
_ARG_SRC_ITER, _ARG_SRC_ITER_C, _ARG_WEIGHTS_ITER, _ARG_BIAS = 2, 3, 34, 41
_ARG_DST_ITER, _ARG_DST_ITER_C = 18, 19
_ARG_DIFF_SRC_ITER, _ARG_DIFF_SRC_ITER_C = 130, 131
_ARG_DIFF_WEIGHTS_ITER, _ARG_DIFF_BIAS = 162, 169
_ARG_DIFF_DST_ITER, _ARG_DIFF_DST_ITER_C = 146, 147
_LSTM_ROLES = [(a, 0) for a in (_ARG_SRC, _ARG_SRC_ITER, _ARG_SRC_ITER_C, _ARG_WEIGHTS,
                                _ARG_WEIGHTS_ITER, _ARG_BIAS, _ARG_DST, _ARG_DST_ITER,
                                _ARG_DST_ITER_C)]
_LSTM_DIFF_ROLES = [(a, 0) for a in (_ARG_DIFF_SRC, _ARG_DIFF_SRC_ITER, _ARG_DIFF_SRC_ITER_C,
                                     _ARG_DIFF_WEIGHTS, _ARG_DIFF_WEIGHTS_ITER, _ARG_DIFF_BIAS,
                                     _ARG_DIFF_DST, _ARG_DIFF_DST_ITER, _ARG_DIFF_DST_ITER_C)]


def _lstm_shapes(x, w_ih, w_hh, h0, c0, b):
    """(L, N, C, H) where the arrays are float32 NumPy arrays of one LSTM layer's shapes: x
    (L, N, C), w_ih (4H, C), w_hh (4H, H), h0 and c0 (N, H), b (4H,) or None; else None."""
    arrays = [a for a in (x, w_ih, w_hh, h0, c0, b) if a is not None]
    if not all(type(a) is np.ndarray and a.dtype == np.float32 for a in arrays) or \
            x.ndim != 3 or w_hh.ndim != 2:
        return None
    (length, n, c), h = x.shape, w_hh.shape[1]
    if min(length, n, c, h) == 0 or w_ih.shape != (4 * h, c) or w_hh.shape != (4 * h, h) or \
            h0.shape != (n, h) or c0.shape != (n, h) or (b is not None and b.shape != (4 * h,)):
        return None
    return length, n, c, h


def _lstm_operands(x, w_ih, w_hh, h0, c0, b, h, forward_layout):
    """The forward's inputs as oneDNN reads them: x (L, N, C); the states as (1, 1, N, H); the
    weights (4H, I) as (1, 1, I, 4, H), transposed copies in its forward layout (ldigo), or
    read as they lie in its backward's (ldgoi); the bias (1, 1, 4, H), zeros where None."""
    def weight(w):
        if forward_layout:
            return np.ascontiguousarray(w.T).reshape(1, 1, w.shape[1], 4, h)
        return np.ascontiguousarray(w).reshape(1, 1, 4, h, w.shape[1]).transpose(0, 1, 4, 2, 3)
    bias = np.zeros(4 * h, np.float32) if b is None else np.ascontiguousarray(b)
    return [np.ascontiguousarray(x), np.ascontiguousarray(h0).reshape((1, 1) + h0.shape),
            np.ascontiguousarray(c0).reshape((1, 1) + c0.shape), weight(w_ih), weight(w_hh),
            bias.reshape(1, 1, 4, h)]


def _lstm_forward(lib, engine, pd, prop, mds, attr):
    return lib.dnnl_lstm_forward_primitive_desc_create(
        pd, engine, prop, _LEFT_TO_RIGHT, *mds[:5], None, None, *mds[5:9], 0, attr)


def _lstm_training(forward):
    """Runs the training forward on ``forward`` (the operands and the three results): its
    workspace (every step's gates, for the backward), or None where it did not run."""
    def make(lib, engine, pd, attr, mds):
        return _lstm_forward(lib, engine, pd, _FORWARD_TRAINING, mds, attr)
    return _run_keeping("lstm_training", forward, (), make, _LSTM_ROLES)


def _run_keeping(kind, arrays, geometry, make, roles):
    """Runs a training forward primitive on ``arrays`` as they lie (``_plan_for``): the
    workspace it leaves for its backward (a new byte array), or None where it did not run."""
    plan = _plan_for(kind, arrays, geometry, make, roles, choose=False,
                     extra=[(_ARG_WORKSPACE, _Q_WORKSPACE)])
    if not plan:
        return None
    workspace = np.empty(plan.extra_sizes[0], np.uint8)
    try:
        plan(arrays + [workspace])
    except _Failed:
        return None
    return workspace


def _run_reading(kind, workspace, arrays, geometry, make, roles):
    """Runs a backward primitive on ``arrays`` as they lie (``_plan_for``) with the
    ``workspace`` its training forward left (``_run_keeping``); whether it ran."""
    plan = _plan_for(kind, arrays, geometry, make, roles, choose=False,
                     extra=[(_ARG_WORKSPACE, _Q_WORKSPACE)])
    if not plan or plan.extra_sizes[0] != workspace.size:
        return False
    try:
        plan(arrays + [workspace])
    except _Failed:
        return False
    return True


# The workspace each kept forward left for its backward (the gates of every step, in oneDNN's
# layout), by the id of the forward's result: (a weak reference to that result, the
# workspace, the inputs' fingerprint). An entry goes when its result is freed.
_workspaces = {}


def _fingerprint(*arrays):
    """Where the arrays lie, their shapes and strides: a backward uses a kept workspace only
    for the very arrays its forward read."""
    return tuple(None if a is None else (a.__array_interface__["data"][0], a.shape, a.strides)
                 for a in arrays)


def lstm(x, w_ih, w_hh, h0, c0, b=None, keep=False):
    """One LSTM layer over a sequence (PyTorch's equations and gate order i, f, g, o), oneDNN's
    fused kernel: the input's projection ``x @ w_ih.T + b`` for every step as one GEMM, then
    per step ``h @ w_hh.T`` and the gates in one pass. ``x`` (L, N, C), ``w_ih`` (4H, C),
    ``w_hh`` (4H, H), ``h0`` and ``c0`` (N, H), ``b`` (4H,) or None, all float32: a new
    (L + 1, N, H) array, every step's h then the last step's c, or None where oneDNN does not
    serve the call. ``keep``: run the training forward and keep its workspace (the gates of
    every step) for one ``lstm_backward`` with this result, or until the result is freed."""
    shapes = _lstm_shapes(x, w_ih, w_hh, h0, c0, b)
    if shapes is None:
        return None
    length, n, _, h = shapes
    out = np.empty((length + 1, n, h), np.float32)
    arrays = _lstm_operands(x, w_ih, w_hh, h0, c0, b, h, True) + [
        out[:length], np.empty((1, 1, n, h), np.float32), out[length:].reshape(1, 1, n, h)]
    if not keep:
        def make(lib, engine, pd, attr, mds):
            return _lstm_forward(lib, engine, pd, _FORWARD_INFERENCE, mds, attr)
        return out if _run_into("lstm", arrays, (), make, _LSTM_ROLES, choose=False) else None
    workspace = _lstm_training(arrays)
    if workspace is None:
        return None
    key = id(out)
    _workspaces[key] = (weakref.ref(out, lambda _: _workspaces.pop(key, None)), workspace,
                        _fingerprint(x, w_ih, w_hh, h0, c0, b))
    return out


def _kept_workspace(out, x, w_ih, w_hh, h0, c0, b=None):
    """The workspace ``lstm(..., keep=True)`` kept with its result ``out`` for these inputs, or
    None."""
    entry = _workspaces.get(id(out)) if out is not None else None
    if entry is None or entry[0]() is not out or \
            entry[2] != _fingerprint(x, w_ih, w_hh, h0, c0, b):
        return None
    return entry[1]


def _forward_layout_mds(lib, mds, c, h):
    """Descriptors of the weights (1, 1, I, 4, H) in oneDNN's forward layout, for the forward
    a backward primitive is made against (the caller destroys them)."""
    made = []
    for i in (c, h):
        md = _vp()
        _check(lib.dnnl_memory_desc_create_with_strides(
            ctypes.byref(md), 5, _Dims(1, 1, i, 4, h), _F32,
            _Dims(i * 4 * h, i * 4 * h, 4 * h, h, 1)), "md")
        made.append(md)
    return made


def lstm_backward(g, x, w_ih, w_hh, h0, c0, b=None, out=None):
    """The gradients through ``lstm`` of the cotangent ``g`` (L + 1, N, H) of its result
    ``out``, from oneDNN's backward kernel: one flat float32 array of the gradients of x, w_ih,
    w_hh, h0, c0 and (where ``b`` is given) b, each in its input's shape, in that order; None
    where oneDNN does not serve the call. The kernel reads the gates of every step from the
    forward's workspace: the one ``lstm(..., keep=True)`` kept with ``out`` for these very
    arrays, else one the training forward makes first."""
    shapes = _lstm_shapes(x, w_ih, w_hh, h0, c0, b)
    if shapes is None or type(g) is not np.ndarray or g.dtype != np.float32:
        return None
    length, n, c, h = shapes
    if g.shape != (length + 1, n, h):
        return None
    workspace = _kept_workspace(out, x, w_ih, w_hh, h0, c0, b)
    if workspace is not None:         # the forward's result: its h, final h and final c
        # used once: a result kept longer (a final state carried to the next batch) does not
        # keep the workspace too, and a second backward runs the forward again
        _workspaces.pop(id(out), None)
        results = [out[:length], out[length - 1:length].reshape(1, 1, n, h),
                   out[length:].reshape(1, 1, n, h)]
    else:
        results = [np.empty((length, n, h), np.float32), np.empty((1, 1, n, h), np.float32),
                   np.empty((1, 1, n, h), np.float32)]
        workspace = _lstm_training(_lstm_operands(x, w_ih, w_hh, h0, c0, b, h, True) + results)
        if workspace is None:
            return None
    sizes = [length * n * c, 4 * h * c, 4 * h * h, n * h, n * h] + [4 * h] * (b is not None)
    packed = np.empty(sum(sizes), np.float32)
    ends = np.cumsum(sizes).tolist()
    dx, dw_ih, dw_hh, dh0, dc0 = (packed[e - s:e] for s, e in zip(sizes[:5], ends))
    db = packed[ends[-1] - 4 * h:] if b is not None else np.empty(4 * h, np.float32)
    g = np.ascontiguousarray(g)
    # oneDNN gives the weights' gradients in its forward layout (I, 4H): transposed after
    grads_t = [np.empty((1, 1, i, 4, h), np.float32) for i in (c, h)]
    arrays = _lstm_operands(x, w_ih, w_hh, h0, c0, b, h, False) + results + [
        dx.reshape(length, n, c), dh0.reshape(1, 1, n, h), dc0.reshape(1, 1, n, h), *grads_t,
        db.reshape(1, 1, 4, h), g[:length], np.zeros((1, 1, n, h), np.float32),
        g[length:].reshape(1, 1, n, h)]

    def make(lib, engine, pd, attr, mds):
        weights = _forward_layout_mds(lib, mds, c, h)
        try:
            return _against_forward(
                lib, lambda hint: _lstm_forward(lib, engine, hint, _FORWARD_TRAINING,
                                                mds[:3] + weights + mds[5:9], attr),
                lambda hint: lib.dnnl_lstm_backward_primitive_desc_create(
                    pd, engine, _BACKWARD, _LEFT_TO_RIGHT, *mds[:5], None, None, *mds[5:14],
                    None, None, *mds[14:18], _OVERWRITE, hint, attr))
        finally:
            for md in weights:
                lib.dnnl_memory_desc_destroy(md)
    if not _run_reading("lstm_backward", workspace, arrays, (), make,
                        _LSTM_ROLES + _LSTM_DIFF_ROLES):
        return None
    for grad, grad_t, i in ((dw_ih, grads_t[0], c), (dw_hh, grads_t[1], h)):
        grad.reshape(4 * h, i)[...] = grad_t.reshape(i, 4 * h).T
    return packed


# ---- max pooling's gradient ------------------------------------------------------------------
_POOLING_MAX = 0x1ff                      # dnnl_pooling_max


def _pool_forward(lib, engine, pd, src, dst, geo, attr):
    return lib.dnnl_pooling_forward_primitive_desc_create(pd, engine, _FORWARD_TRAINING,
                                                          _POOLING_MAX, src, dst, *geo, attr)


def max_pool_backward(g, x, kernel, stride, padding, dilation):
    """The gradient of a max pooling of ``x`` (N, C, H, W) by ``kernel`` windows (``stride``,
    ``dilation``, ``padding`` ((top, bottom), (left, right)) of the lowest value): each window's
    ``g`` (N, C, OH, OW) at its first largest element (window positions in row-major order),
    from oneDNN's forward (for where the maxima are: its workspace) and backward; None where
    oneDNN does not serve. (A window holding a NaN is the caller's: oneDNN's maximum skips it.)"""
    if not _usable(x, g) or g.shape[:2] != x.shape[:2]:
        return None
    (pt, pb), (pl, pr) = padding
    geo = (_Dims(*stride), _Dims(*kernel), _Dims(*(d - 1 for d in dilation)), _Dims(pt, pl),
           _Dims(pb, pr))
    key = (tuple(kernel), tuple(stride), tuple(map(tuple, padding)), tuple(dilation))
    x, g = np.ascontiguousarray(x), np.ascontiguousarray(g)
    workspace = _run_keeping(
        "max_pool", [x, np.empty_like(g)], key,
        lambda lib, engine, pd, attr, mds: _pool_forward(lib, engine, pd, mds[0], mds[1], geo,
                                                         attr),
        [(_ARG_SRC, 0), (_ARG_DST, 0)])
    if workspace is None:
        return None
    dx = np.empty_like(x)

    def make(lib, engine, pd, attr, mds):
        return _against_forward(
            lib, lambda hint: _pool_forward(lib, engine, hint, mds[1], mds[0], geo, attr),
            lambda hint: lib.dnnl_pooling_backward_primitive_desc_create(
                pd, engine, _POOLING_MAX, mds[1], mds[0], *geo, hint, attr))
    done = _run_reading("max_pool_backward", workspace, [g, dx], key, make,
                        [(_ARG_DIFF_DST, 0), (_ARG_DIFF_SRC, 0)])
    return dx if done else None
