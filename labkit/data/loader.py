"""``DataLoader``, as PyTorch's: batches of a dataset in the order a sampler gives, in this
process or in worker processes (``num_workers``), with a progress bar that draws as a widget in
Jupyter and as text in a terminal (``progress=``, ``tqdm.auto``)."""
import itertools
import math
import multiprocessing
import numbers
import os
import sys
import warnings
import weakref

import numpy as np

from ..tensor.random import numpy_generator
from .collate import default_collate, default_convert
from .dataset import IterableDataset, batch_getter
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler
from .worker import (IterableEnd, LoaderTimeout, Resume, WorkerDied, WorkerException,
                     WorkerPool)

_FIXED_AFTER_INIT = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                     "persistent_workers")


class _InfiniteConstantSampler(Sampler):
    """The sampler of an IterableDataset: None forever (the stream decides when it ends)."""

    def __iter__(self):
        while True:
            yield None


class Fetcher:
    """How a task (an index, a batch of indices, or Nones for a stream) becomes a batch.
    ``Fetcher(...)(dataset)`` gives the function; a plain object, so spawned workers get it."""

    def __init__(self, is_iterable, auto_collation, collate_fn, drop_last):
        self.is_iterable = is_iterable
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last

    def __call__(self, dataset):
        collate, auto = self.collate_fn, self.auto_collation
        if self.is_iterable:
            stream = iter(dataset)

            def fetch(index):
                if not auto:
                    return collate(next(stream))
                batch = list(itertools.islice(stream, len(index)))
                if not batch or (self.drop_last and len(batch) < len(index)):
                    raise StopIteration
                return collate(batch)
            return fetch
        whole = batch_getter(dataset) if auto and collate is default_collate else None
        many = getattr(dataset, "__getitems__", None)

        def fetch(index):
            if not auto:
                return collate(dataset[index])
            if whole is not None:
                return whole(index)
            return collate(many(index) if many else [dataset[i] for i in index])
        return fetch


class DataLoader:
    """Iterate over ``dataset`` in batches, as ``torch.utils.data.DataLoader``.

    - ``batch_size`` samples per batch (None: samples one by one, not batched); the last batch
      is smaller unless ``drop_last``.
    - ``shuffle``: a new random order every epoch (every ``for`` loop), drawn from
      ``generator`` (an ``lk.Generator``), or from ``lk.manual_seed``'s stream; labkit adds
      ``seed=`` for a loader with a stream of its own. ``sampler`` (indices) or
      ``batch_sampler`` (lists of indices) give any order instead.
    - ``collate_fn`` turns a list of samples into a batch (``default_collate``: tensors, arrays
      and numbers stacked, dicts and tuples field by field).
    - ``num_workers > 0`` loads batches in that many worker processes, ``prefetch_factor``
      batches ahead each (default 2), in the same order as ``num_workers=0``. Each worker
      seeds labkit, ``random`` and NumPy's global generator from ``get_worker_info().seed``
      (a base seed drawn per epoch, plus the worker's id), then calls
      ``worker_init_fn(worker_id)``. ``persistent_workers`` keeps them between epochs;
      ``timeout`` (seconds) bounds the wait for one batch. An exception in a worker is raised
      here, naming the worker and with its traceback. Workers end when the epoch does, when the
      loop is left (``break``, an exception, Ctrl-C) or when the iterator is collected.
    - ``pin_memory`` is accepted; it changes nothing (batches are in host memory already).
    - ``progress``: True (or a text label) shows a tqdm bar, a widget in Jupyter (labkit's).

    A ``TensorDataset`` (or a Subset of one) with the default ``collate_fn`` is batched by
    indexing each tensor once per batch.

    >>> import labkit as lk
    >>> ds = lk.data.TensorDataset(lk.arange(10).float(), lk.arange(10))
    >>> loader = lk.data.DataLoader(ds, batch_size=4, shuffle=True, seed=0)
    >>> len(loader), [y.shape for _, y in loader]
    (3, [(4,), (4,), (2,)])
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True, seed=None, progress=False):
        if not isinstance(num_workers, numbers.Integral) or num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in "
                             "multiprocessing. let num_workers > 0 to enable multiprocessing, "
                             "otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        if prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError(f"prefetch_factor option should be non-negative, got "
                             f"{prefetch_factor}")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        is_iterable = isinstance(dataset, IterableDataset)
        if is_iterable:
            for name, value in (("shuffle", shuffle), ("sampler", sampler),
                                ("batch_sampler", batch_sampler)):
                if value not in (None, False):
                    raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                     f"{name} option, but got {name}={value!r} (a stream "
                                     f"has no indices to order; shuffle inside its __iter__)")
        elif sampler is None and batch_sampler is None and not (
                hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")):
            raise TypeError(f"DataLoader needs a dataset with __len__ and __getitem__ (e.g. an "
                            f"lk.data.TensorDataset), or an lk.data.IterableDataset; got "
                            f"{type(dataset).__name__}")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if seed is not None:
            if generator is not None:
                raise ValueError("DataLoader: give seed= or generator=, not both")
            generator = np.random.default_rng(seed)
        if sampler is None:
            if is_iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.dataset = dataset
        self.num_workers = int(num_workers)
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        self.seed = seed
        self.progress = progress
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if batch_sampler is not None else default_convert)
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        self._is_iterable = is_iterable
        self._iterator = None
        self._initialized = True
        self._check_worker_number()

    def __setattr__(self, name, value):
        if name in _FIXED_AFTER_INIT and getattr(self, "_initialized", False):
            raise ValueError(f"{name} attribute should not be set after "
                             f"{type(self).__name__} is initialized")
        super().__setattr__(name, value)

    @property
    def multiprocessing_context(self):
        return self._multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, context):
        if context is not None:
            if self.num_workers == 0:
                raise ValueError(f"multiprocessing_context can only be used with multi-process "
                                 f"loading (num_workers > 0), but got "
                                 f"num_workers={self.num_workers}")
            if isinstance(context, str):
                methods = multiprocessing.get_all_start_methods()
                if context not in methods:
                    raise ValueError(f"multiprocessing_context option should specify a valid "
                                     f"start method in {methods!r}, but got "
                                     f"multiprocessing_context={context!r}")
                context = multiprocessing.get_context(context)
            elif not isinstance(context, multiprocessing.context.BaseContext):
                raise TypeError(f"multiprocessing_context option should be a valid context "
                                f"object or a string specifying the start method, but got "
                                f"multiprocessing_context={context!r}")
        self._multiprocessing_context = context

    def _context(self):
        if self._multiprocessing_context is not None:
            return self._multiprocessing_context
        if sys.platform.startswith("linux"):     # why fork: see labkit/data/worker.py
            return multiprocessing.get_context("fork")
        return multiprocessing.get_context()

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def _fetcher(self):
        return Fetcher(self._is_iterable, self._auto_collation, self.collate_fn, self.drop_last)

    def _check_worker_number(self):
        if self.num_workers == 0:
            return
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
            os.cpu_count())
        if cpus is not None and self.num_workers > cpus:
            warnings.warn(f"This DataLoader will create {self.num_workers} worker processes in "
                          f"total. Our suggested max number of worker in current system is "
                          f"{cpus}, which is smaller than what this DataLoader is going to "
                          f"create. Please be aware that excessive worker creation might get "
                          f"DataLoader running slow or even freeze, lower the worker number "
                          f"to avoid potential slowness/freeze if necessary.", stacklevel=3)

    def __len__(self):
        if self._is_iterable:
            length = len(self.dataset)
            if self.batch_size is not None:
                length = (length // self.batch_size if self.drop_last
                          else math.ceil(length / self.batch_size))
            return length
        return len(self._index_sampler)

    def __iter__(self):
        if self.num_workers == 0:
            batches = _SingleProcessIter(self)
        elif self.persistent_workers:
            if self._iterator is None or self._iterator.closed:
                self._iterator = _MultiProcessIter(self)
            else:
                self._iterator.reset(self)
            batches = self._iterator
        else:
            batches = _MultiProcessIter(self)
        if self.progress:
            from tqdm.auto import tqdm
            desc = self.progress if isinstance(self.progress, str) else None
            try:
                total = len(self)
            except TypeError:
                total = None
            return iter(tqdm(batches, total=total, desc=desc, unit="batch"))
        return batches

    def __repr__(self):
        try:
            size = f" of {len(self.dataset)}"
        except TypeError:
            size = ""
        try:
            count = f", {len(self)} batches"
        except TypeError:
            count = ""
        workers = f", num_workers={self.num_workers}" if self.num_workers else ""
        return (f"DataLoader({type(self.dataset).__name__}{size}, batch_size={self.batch_size}, "
                f"shuffle={isinstance(self.sampler, RandomSampler)}{workers}{count})")


class _SingleProcessIter:
    """Batches made in this process, one per ``next``."""

    def __init__(self, loader):
        self._indices = iter(loader._index_sampler)
        self._fetch = loader._fetcher()(loader.dataset)

    def __iter__(self):
        return self

    def __next__(self):
        return self._fetch(next(self._indices))


class _MultiProcessIter:
    """Batches made by worker processes, handed out ``prefetch_factor`` per worker ahead and
    put back in order (PyTorch's protocol: task numbers, a reorder buffer, and workers of a
    stream leaving one by one as their copies run out)."""

    def __init__(self, loader):
        self._num_workers = loader.num_workers
        self._prefetch = max(1, loader.prefetch_factor) * loader.num_workers
        self._timeout = loader.timeout if loader.timeout > 0 else None
        self._persistent = loader.persistent_workers
        self._in_order = loader.in_order
        # spawn() leaves the stream the sampler draws from as it is, so batches are the same
        # as with num_workers=0; each epoch's workers get new seeds all the same
        base_seed = int(numpy_generator(loader.generator).spawn(1)[0].integers(2 ** 62))
        self._pool = WorkerPool(loader._context(), loader.num_workers, loader._fetcher(),
                                loader._is_iterable, base_seed, loader.worker_init_fn,
                                loader.dataset)
        self._finalizer = weakref.finalize(self, self._pool.shutdown)
        self.reset(loader, first=True)

    @property
    def closed(self):
        return self._pool.closed

    def reset(self, loader, first=False):
        """Start an epoch: a new pass of the sampler, and ``prefetch`` tasks handed out."""
        self._indices = iter(loader._index_sampler)
        self._sent = self._received = 0
        self._tasks = {}                 # task number -> [worker] or [worker, batch]
        self._active = [True] * self._num_workers
        self._next_worker = itertools.cycle(range(self._num_workers))
        if not first:                    # persistent workers: each acknowledges the new epoch
            for w in range(self._num_workers):
                self._pool.send(w, Resume())
            waiting = set(range(self._num_workers))
            while waiting:
                worker_id, (task, _) = self._pool.receive(sorted(waiting), self._timeout)
                if isinstance(task, Resume):
                    waiting.discard(worker_id)
        for _ in range(self._prefetch):
            self._hand_out()

    def _hand_out(self):
        try:
            index = next(self._indices)
        except StopIteration:
            return
        for _ in range(self._num_workers):
            worker_id = next(self._next_worker)
            if self._active[worker_id]:
                break
        else:
            return
        self._pool.send(worker_id, (self._sent, index))
        self._tasks[self._sent] = [worker_id]
        self._sent += 1

    def _retire(self, worker_id):
        """Worker ``worker_id``'s stream is exhausted: no more tasks for it."""
        self._active[worker_id] = False
        if not self._persistent:
            self._pool.stop(worker_id)

    def __iter__(self):
        return self

    def __next__(self):
        if self._pool.closed:
            raise StopIteration
        try:
            return self._next_batch()
        except (KeyboardInterrupt, WorkerDied):
            self.close()
            raise
        except Exception as error:
            if not hasattr(error, "worker_id") and not isinstance(error, LoaderTimeout):
                raise
            # the worker's traceback is in the message; without our frames (and with no
            # `self` here) a stored traceback (a notebook's last error) keeps no worker alive
            del self
            raise error.with_traceback(None)

    def _next_batch(self):
        while True:
            while self._received < self._sent:        # skip tasks of retired workers
                task = self._tasks.get(self._received)
                if task is not None and (len(task) == 2 or self._active[task[0]]):
                    break
                self._tasks.pop(self._received, None)
                self._received += 1
            else:
                if not self._persistent:
                    self.close()
                raise StopIteration
            task = self._tasks[self._received]
            if len(task) == 2:
                del self._tasks[self._received]
                self._received += 1
                return self._deliver(task[1])
            active = [w for w in range(self._num_workers) if self._active[w]]
            worker_id, (idx, data) = self._pool.receive(active, self._timeout)
            if isinstance(data, IterableEnd):
                self._retire(data.worker_id)
                self._hand_out()
                continue
            if idx == self._received or not self._in_order:
                del self._tasks[idx]
                if idx == self._received:
                    self._received += 1
                return self._deliver(data)
            self._tasks[idx].append(data)

    def _deliver(self, data):
        self._hand_out()
        if isinstance(data, WorkerException):
            data.reraise()
        return data

    def close(self):
        """End the workers now (also done when the epoch ends, or the iterator is dropped)."""
        self._finalizer()
