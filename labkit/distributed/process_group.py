"""Process groups in ``torch.distributed``'s spelling: ``init_process_group``, ranks, sub-groups.

The processes are the ranks of one MPI world, as everywhere in ``labkit.dist``: started by
``python -m labkit.dist.run --nproc_per_node=N script.py`` (which sets torchrun's environment:
``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``...), by ``mpiexec`` or ``srun``, or launched from a
notebook cell (``lk.dist.launch`` / ``Cluster``). ``init_process_group`` joins them; no
rendezvous address is needed, so ``MASTER_ADDR`` / ``MASTER_PORT`` are set but not used.

Backend names map onto labkit's: ``"gloo"`` and ``"mpi"`` carry every tensor over MPI (GPU
tensors through host memory, as Gloo does), ``"nccl"`` carries GPU tensors over NCCL (CPU
tensors still go over MPI), and None picks NCCL for GPU tensors where each rank has a GPU of
its own, else MPI.

Unlike ``lk.dist.init()``, ``init_process_group`` neither reseeds the random generator nor
changes the default device: a PyTorch program seeds and places things itself.

>>> import labkit.distributed as dist
>>> dist.init_process_group("gloo", rank=0, world_size=1)       # a world of one
>>> dist.get_rank(), dist.get_world_size(), dist.get_backend()
(0, 1, 'gloo')
>>> dist.destroy_process_group(); dist.is_initialized()
False
"""
import os

from ..dist import runtime
from ..dist.errors import DistError
from ..dist.launch_env import from_environ
from ..dist.script import join_started_ranks


class NotInitializedError(DistError, ValueError):
    """A process-group function was called before ``init_process_group`` (PyTorch raises a
    ValueError here too)."""


class AlreadyInitializedError(DistError, ValueError):
    """``init_process_group`` called while the default group exists (a ValueError, as in
    PyTorch)."""


class Backend(str):
    """A backend's name, lower-cased (``Backend("GLOO") == "gloo"``), as ``torch.distributed``'s.

    >>> from labkit.distributed import Backend
    >>> Backend("NCCL"), Backend.GLOO
    ('nccl', 'gloo')
    """
    GLOO, NCCL, MPI = "gloo", "nccl", "mpi"
    UNDEFINED = "undefined"

    def __new__(cls, name):
        if not isinstance(name, str):
            raise TypeError(f"Backend: the name must be a string, got {type(name).__name__}")
        return super().__new__(cls, name.lower())


# torch's backend name -> labkit.dist's (runtime.Group.backend)
_BACKENDS = {"gloo": "mpi", "mpi": "mpi", "nccl": "nccl", "cpu:gloo,cuda:nccl": "auto"}


def _labkit_backend(backend):
    if backend is None:
        return "auto"
    name = Backend(backend)
    if name not in _BACKENDS:
        raise DistError(
            f"init_process_group: backend {backend!r} is not one labkit has; use 'gloo' or "
            f"'mpi' (every tensor over MPI), 'nccl' (GPU tensors over NCCL), or None (NCCL for "
            f"GPU tensors where each rank has a GPU, else MPI)")
    return _BACKENDS[name]


class ProcessGroup:
    """A set of ranks that run collectives together: the default group (every rank, made by
    ``init_process_group``) or one made by ``new_group``.

    ``rank()`` is this process's rank within the group and ``size()`` the group's size; the
    ranks' numbers in the whole world are ``labkit.distributed.get_process_group_ranks(pg)``.
    """

    def __init__(self, ranks, group, backend):
        self.ranks = list(ranks)      # the members' ranks in the whole world, in group order
        self._group = group           # labkit.dist's runtime.Group, None for a world of one
        self._backend = backend       # the name given to init_process_group / new_group

    def rank(self):
        return self._group.rank if self._group is not None else 0

    def size(self):
        return len(self.ranks)

    def name(self):
        return self._backend

    def __repr__(self):
        return f"<ProcessGroup ranks={self.ranks} backend={self._backend!r}>"


class GroupMember:
    """``GroupMember.WORLD`` (the default group, None before ``init_process_group``) and
    ``GroupMember.NON_GROUP_MEMBER``: what ``new_group`` returns on ranks outside the group."""
    WORLD = None
    NON_GROUP_MEMBER = object()


class group:
    """``dist.group.WORLD``: the default process group (None before ``init_process_group``)."""
    WORLD = None


_state = {"owns": False}   # owns: init_process_group joined the MPI world itself (destroy leaves)


def _set_default(pg):
    GroupMember.WORLD = group.WORLD = pg


def is_available():
    """Whether the distributed package can be used here (mpi4py importable, as labkit's
    collectives need for more than one rank)."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def is_mpi_available():
    return is_available()


def is_gloo_available():
    """True where MPI is: "gloo" runs on MPI here."""
    return is_available()


def is_nccl_available():
    """Whether CuPy with NCCL is installed (GPU collectives)."""
    try:
        from cupy.cuda import nccl
    except Exception:
        return False
    return bool(getattr(nccl, "available", True))


def is_torchelastic_launched():
    """Whether torchrun's environment is set (``python -m labkit.dist.run`` sets it)."""
    return os.environ.get("TORCHELASTIC_RUN_ID") is not None


def is_initialized():
    """Whether there is a default process group: after ``init_process_group`` (until
    ``destroy_process_group``), and always inside a worker launched from a notebook cell."""
    return group.WORLD is not None or runtime.is_initialized()


def _default():
    """The default ProcessGroup; a launched worker's group when ``init_process_group`` was not
    called there."""
    pg = group.WORLD
    if pg is None:
        g = runtime.group()
        if g is None:
            raise NotInitializedError(
                "Default process group has not been initialized, please make sure to call "
                "init_process_group. (In labkit: start the script with `python -m "
                "labkit.dist.run --nproc_per_node=N script.py` and call "
                "init_process_group() in it, or init_process_group(rank=0, world_size=1) for "
                "a world of one.)")
        pg = ProcessGroup(range(g.size), g, None)
    return pg


def resolve(pg, caller):
    """``pg`` (None: the default group) as a ProcessGroup, or None when this rank is not a
    member (``GroupMember.NON_GROUP_MEMBER``)."""
    if pg is None or pg is group.WORLD:
        return _default()
    if pg is GroupMember.NON_GROUP_MEMBER:
        return None
    if not isinstance(pg, ProcessGroup):
        raise TypeError(f"{caller}: group= takes a ProcessGroup (from new_group) or None, got "
                        f"{type(pg).__name__}")
    return pg


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None, device_id=None):
    """Join this process to the default process group, as ``torch.distributed``'s does.

    The rank and world size come from the launcher's environment (``init_method=None`` or
    ``"env://"``): ``python -m labkit.dist.run`` (torchrun's ``RANK`` / ``WORLD_SIZE`` /
    ``LOCAL_RANK``), ``mpiexec`` or ``srun``. ``rank`` and ``world_size``, when given, must
    agree with it. ``rank=0, world_size=1`` without a launcher makes a world of one (every
    collective then returns its input). ``timeout``, ``group_name``, ``pg_options`` and
    ``device_id`` are accepted and change nothing; a ``tcp://`` or ``file://`` rendezvous or a
    ``store`` cannot be used, since the ranks meet as one MPI world.

    >>> import labkit.distributed as dist
    >>> dist.init_process_group(backend="gloo", init_method="env://", rank=0, world_size=1)
    >>> dist.is_initialized(), dist.get_world_size()
    (True, 1)
    >>> dist.destroy_process_group()
    """
    if group.WORLD is not None:
        raise AlreadyInitializedError(
            "trying to initialize the default process group twice! (call "
            "destroy_process_group() first, or check is_initialized())")
    lk_backend = _labkit_backend(backend)
    name = Backend(backend) if backend is not None else _default_name(lk_backend)
    one = world_size == 1 and rank in (0, -1)
    if init_method not in (None, "env://") and not one:
        raise DistError(
            f"init_process_group(init_method={init_method!r}): labkit's ranks meet as one MPI "
            f"world, not through a rendezvous address. Start the script with `python -m "
            f"labkit.dist.run --nproc_per_node=N script.py` (or mpiexec) and leave "
            f"init_method out (or 'env://').")
    if store is not None and not one:
        raise DistError("init_process_group(store=...): labkit's ranks meet as one MPI world, "
                        "not through a store; leave store out")
    joined, owns = runtime.group(), False
    if joined is None:
        env = from_environ()
        if env is not None and env.world_size > 1:
            joined, owns = join_started_ranks(lk_backend, "init_process_group"), True
        elif env is None and not one:
            raise DistError(
                "init_process_group: this process was not started as one of several ranks "
                "(no RANK / WORLD_SIZE, nor mpiexec's or srun's variables, in the "
                "environment). Start the script with `python -m labkit.dist.run "
                "--nproc_per_node=N script.py` (torchrun's flags work), or pass rank=0, "
                "world_size=1 for a world of one.")
    if joined is None:                # a world of one: no MPI needed
        _check_agrees(1, 0, world_size, rank)
        _set_default(ProcessGroup([0], None, name))
        return None
    _check_agrees(joined.size, joined.rank, world_size, rank)
    _state["owns"] = owns
    _set_default(ProcessGroup(range(joined.size), joined, name))
    return None


def _default_name(lk_backend):
    return {"mpi": "mpi", "nccl": "nccl", "auto": "cpu:gloo,cuda:nccl"}[lk_backend]


def _check_agrees(size, me, world_size, rank):
    if world_size not in (-1, size) or rank not in (-1, me):
        raise DistError(
            f"init_process_group(world_size={world_size}, rank={rank}): this process is rank "
            f"{me} of {size} as its launcher started it; leave rank and world_size out (the "
            f"launcher's environment gives them)")


def destroy_process_group(group_=None):
    """Leave the default process group (``group_`` None), or forget a group ``new_group`` made.
    A worker launched from a notebook cell stays in its launcher's group; a script's ranks
    leave MPI's world (``init_process_group`` may be called again)."""
    if group_ is None or group_ is group.WORLD:
        pg = group.WORLD
        _set_default(None)
        if pg is not None and _state["owns"]:
            runtime.leave()
        _state["owns"] = False
        return
    if isinstance(group_, ProcessGroup) and group_._group is not None:
        group_._group.free()
        group_._group = None


def get_rank(group=None):
    """This process's rank in ``group`` (default: the whole world); -1 if it is not a member.

    >>> import labkit.distributed as dist
    >>> dist.init_process_group("gloo", rank=0, world_size=1); dist.get_rank()
    0
    >>> dist.destroy_process_group()
    """
    pg = resolve(group, "get_rank")
    return -1 if pg is None else pg.rank()


def get_world_size(group=None):
    """How many ranks ``group`` has (default: the whole world); -1 if this rank is not in it."""
    pg = resolve(group, "get_world_size")
    return -1 if pg is None else pg.size()


def get_backend(group=None):
    """The backend's name, as given to ``init_process_group`` (or ``new_group``)."""
    pg = resolve(group, "get_backend")
    if pg is None:
        raise DistError("get_backend: this rank is not a member of the group")
    if pg._backend is None:           # a launched worker's group, without init_process_group
        return Backend(_default_name(pg._group.backend if pg._group else "mpi"))
    return Backend(pg._backend)


def get_process_group_ranks(group):
    """The world ranks of ``group``'s members, in group order."""
    pg = resolve(group, "get_process_group_ranks")
    if pg is None:
        raise DistError("get_process_group_ranks: this rank is not a member of the group")
    return list(pg.ranks)


def get_global_rank(group, group_rank):
    """The world rank of the member that has rank ``group_rank`` in ``group``."""
    return get_process_group_ranks(group)[group_rank]


def get_group_rank(group, global_rank):
    """The rank within ``group`` of the world's rank ``global_rank``."""
    ranks = get_process_group_ranks(group)
    if global_rank not in ranks:
        raise ValueError(f"get_group_rank: rank {global_rank} is not in the group {ranks}")
    return ranks.index(global_rank)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None,
              use_local_synchronization=False, group_desc=None, device_id=None,
              sort_ranks=True):
    """A process group of ``ranks`` (world ranks; default every rank). Every rank of the world
    must call it, with the same ranks, in the same order of calls. Ranks outside get
    ``GroupMember.NON_GROUP_MEMBER``, and the collectives they call with it do nothing.

    >>> import labkit.distributed as dist
    >>> dist.init_process_group("gloo", rank=0, world_size=1)
    >>> pg = dist.new_group([0]); dist.get_world_size(pg)
    1
    >>> dist.destroy_process_group()
    """
    world = _default()
    ranks = list(range(world.size())) if ranks is None else [int(r) for r in ranks]
    if sort_ranks:
        ranks = sorted(ranks)
    bad = [r for r in ranks if not 0 <= r < world.size()]
    if bad or len(set(ranks)) != len(ranks) or not ranks:
        raise DistError(f"new_group(ranks={ranks}): the ranks must be distinct world ranks, "
                        f"0..{world.size() - 1}")
    name = Backend(backend) if backend is not None else world._backend
    if world._group is None:          # a world of one
        return ProcessGroup(ranks, None, name)
    sub = world._group.subgroup(ranks)
    if sub is None:
        return GroupMember.NON_GROUP_MEMBER
    return ProcessGroup(ranks, sub, name)
