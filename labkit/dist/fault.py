"""Fault-tolerant training: periodic checkpoints, and a run that outlives a worker's death.

``train_with_checkpoints(make_state, step_fn, steps, path, every=k, n=...)`` launches workers
that build their state with ``make_state()`` (a dict of objects with ``state_dict`` /
``load_state_dict``: models, optimisers), resume from the checkpoint at ``path`` when there is
one, and run ``step_fn(state, step)`` for each remaining step. Every ``every`` steps (and after
the last) rank 0 writes a checkpoint with ``lk.save`` (atomically: a crash mid-write leaves the
previous one) holding the step number, every object's state and the values ``step_fn``
returned so far. When a worker dies (killed, out of memory, a crash in native code) the
supervisor here sees ``lk.dist.WorkerError`` with the dead ranks, starts a fresh set of workers
(as many again, or, with ``shrink=True``, one fewer: the backup-worker way of carrying on
without the lost machine) and they resume from the last checkpoint. Across hosts
(``hosts=[...]``), ``shrink=True`` resumes on the hosts that still answer, as torchrun's
elastic nodes do: a host that went away (crashed, cut off) is left out with its workers. A Python exception in
``step_fn`` is a bug, not a fault: it is raised at once, not retried.

The run ends as an uninterrupted one would, when each step is a function of the state and the
step number only: take the step's data by ``step`` (not from a shuffled iterator that a restart
would rewind), and draw random numbers inside ``step_fn`` (they are seeded from ``seed`` and
``step``, so a repeated step draws the same). With ``lk.dist.DataParallel`` and a global batch
split by ``lk.dist.rank()`` / ``lk.dist.world_size()``, a checkpoint written by 2 workers
resumes on 1 (or 3) and computes the same steps: the state saved is rank 0's replica, and every
rank loads it.

The checkpoint is a plain ``lk.load``-able dict: ``{"step", "world_size", "history", "state":
{name: state_dict}}``; a finished run can be extended by calling again with more ``steps``.

>>> import labkit as lk
>>> def make_state():
...     model = lk.dist.DataParallel(lk.nn.Linear(3, 1))
...     return {"model": model, "opt": lk.optim.SGD(model.parameters(), lr=0.1)}
>>> def step(state, i):
...     x = lk.ones(4, 3) * (i % 3)           # the batch is a function of the step
...     loss = state["model"](x).square().mean()
...     state["opt"].zero_grad(); state["model"].backward(loss); state["opt"].step()
...     return loss
>>> run = lk.dist.train_with_checkpoints(make_state, step, steps=100, every=10,
...                                      path="run.lk", n=2)               # doctest: +SKIP
>>> len(run.history), run.restarts                                         # doctest: +SKIP
(100, 0)
"""
import os
import sys

from .errors import DistError, WorkerError

CHECKPOINT_KEYS = ("step", "world_size", "history", "state")


class TrainingRun:
    """What ``train_with_checkpoints`` returns.

    - ``state``: rank 0's final ``state_dict`` of every object, by name (load it into a local
      model with ``model.load_state_dict(run.state["model"])``);
    - ``history``: what ``step_fn`` returned at each step on rank 0 (numbers; scalar tensors
      become floats), one per step, none lost to a restart;
    - ``restarts``: how many times workers died and the run resumed;
    - ``world_sizes``: the number of workers of each launch, in order;
    - ``resumed_from``: the step each launch started at (0 for a fresh run).
    """

    def __init__(self, state, history, restarts, world_sizes, resumed_from, path):
        self.state = state
        self.history = history
        self.restarts = restarts
        self.world_sizes = world_sizes
        self.resumed_from = resumed_from
        self.path = path

    @property
    def steps(self):
        return len(self.history)

    def __repr__(self):
        return (f"TrainingRun(steps={self.steps}, restarts={self.restarts}, "
                f"world_sizes={self.world_sizes}, resumed_from={self.resumed_from}, "
                f"path={self.path!r})")


def train_with_checkpoints(make_state, step_fn, steps, path, every=10, n=None, hosts=None,
                           max_restarts=3, shrink=False, seed=0, output="auto", timeout=120,
                           ssh_options=None, network=None, python=None, workdir=None):
    """Train on launched workers with a checkpoint every ``every`` steps; survive a worker's
    death by resuming from the last checkpoint on fresh workers. Returns a ``TrainingRun``.

    - ``make_state()``: runs on every worker; returns a dict name -> object with
      ``state_dict()`` and ``load_state_dict()`` (wrap the model in ``lk.dist.DataParallel``).
    - ``step_fn(state, step)``: one training step, ``step`` counting from 0; what it returns
      on rank 0 (a number, a scalar tensor, or None) goes into the history.
    - ``steps``: the total number of steps; ``path``: the checkpoint file (resumed from when it
      exists, so a second call with more steps continues the run). Workers on another host
      must see the same ``path`` (a shared filesystem).
    - ``max_restarts``: deaths survived before the error is raised. One death is counted
      once: MPI ends the whole world when one rank dies, so the rank that died first cannot
      be told from those ended with it.
    - ``shrink``: on this machine, resume on one worker fewer after each death instead of as
      many again (at least one). With ``hosts``, it is the elastic way of torchrun's nodes:
      after a death every host is asked over SSH whether it is still there, and the run
      resumes on those that answer, each keeping its number of workers (4 workers on 2 hosts
      become 2 on the one left); a host that answers gets fresh workers, whether or not its
      workers were the ones that died. Without ``shrink``, a host that no longer answers ends
      the run with an error naming it.
    - ``seed``: ``make_state`` runs after ``lk.manual_seed(seed)``, and each step after a seed
      made of ``seed`` and the step, so a repeated step draws the same random numbers.
    - ``n``, ``hosts``, ``ssh_options``, ``network``, ``python``, ``workdir``, ``output``,
      ``timeout``: as for ``lk.dist.launch``.
    """
    from .launcher import launch
    if not callable(make_state) or not callable(step_fn):
        raise TypeError("train_with_checkpoints(make_state, step_fn, ...): both must be "
                        "functions: make_state() builds the state on each worker, "
                        "step_fn(state, step) runs one step")
    for name, value, low in (("steps", steps, 0), ("every", every, 1),
                             ("max_restarts", max_restarts, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise DistError(f"train_with_checkpoints: {name} must be an int >= {low}, got "
                            f"{value!r}")
    path = os.path.abspath(os.fspath(path))
    where = _Where(n, hosts, ssh_options, network)
    world_sizes, resumed_from, restarts = [], [], 0
    while True:
        world_sizes.append(where.n)
        resumed_from.append(_checkpoint_step(path))
        try:
            results = launch(run_steps, make_state, step_fn, steps, path, every, seed,
                             n=where.n, hosts=where.hosts, output=output, timeout=timeout,
                             ssh_options=ssh_options, network=network, python=python,
                             workdir=workdir)
            break
        except WorkerError as error:
            died = getattr(error, "died_ranks", [])
            if not died or restarts >= max_restarts:
                raise
            restarts += 1
            lost = where.resume(shrink, path)
            print(f"lk.dist: a worker died (rank(s) {', '.join(map(str, died))} ended"
                  f"{lost}); resuming from the checkpoint at step {_checkpoint_step(path)} "
                  f"on {where.describe()} (restart {restarts} of at most {max_restarts})",
                  file=sys.stderr)
    final = results[0]
    return TrainingRun(final["state"], final["history"], restarts, world_sizes, resumed_from,
                       path)


class _Where:
    """Where the next launch of a run goes: ``n`` workers, on ``hosts`` (None: this machine),
    and how that changes after a death (``resume``)."""

    def __init__(self, n, hosts, ssh_options, network):
        from .cluster import _check_hosts, _default_n
        self.hosts = _check_hosts(hosts)
        self.n = n if n is not None else _default_n(self.hosts)
        self.ssh_options = ssh_options
        self.network = network

    def _plan(self):
        from .remote import plan_hosts
        return plan_hosts(self.hosts, self.n, self.ssh_options, self.network)

    def resume(self, shrink, path):
        """Set where the run resumes after a death; returns what was lost, as words for the
        message ("" when no host was lost)."""
        plan = self._plan() if self.hosts is not None else None
        if plan is None:                  # this machine only: a worker is the unit lost
            self.n = max(1, self.n - 1) if shrink else self.n
            return ""
        answers = plan.answering()
        gone = [str(h) for (h, _), up in zip(plan.hosts, answers) if not up]
        if not gone:
            return ""
        kept = [(str(h), slots) for (h, slots), up in zip(plan.hosts, answers) if up]
        if not shrink or not kept:
            what = ("pass shrink=True to resume on the hosts that answer"
                    if kept else "no host answers")
            raise DistError(f"train_with_checkpoints: after a worker died, host(s) "
                            f"{', '.join(gone)} no longer answer over SSH; {what}, or bring "
                            f"them back and call again with the same path (the checkpoint "
                            f"at {path} is at step {_checkpoint_step(path)})")
        self.hosts = [h for h, _ in kept]
        self.n = sum(slots for _, slots in kept)
        return f"; host(s) {', '.join(gone)} no longer answer and are left out"

    def describe(self):
        if self.hosts is None:
            return f"{self.n} worker(s)"
        return f"{self.n} worker(s) on {', '.join(self.hosts)}"


def _checkpoint_step(path):
    if not os.path.exists(path):
        return 0
    from ..tensor.checkpoint import load
    try:
        return int(load(path)["step"])
    except Exception:
        return 0


def _history_value(value, step):
    from ..tensor.tensor import Tensor
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise DistError(f"train_with_checkpoints: step_fn returned a tensor of shape "
                            f"{value.shape} at step {step}; return a scalar (e.g. the loss) "
                            f"or None")
        return value.item()
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float) or hasattr(value, "__float__"):
        return float(value)
    raise DistError(f"train_with_checkpoints: step_fn returned a {type(value).__name__} at "
                    f"step {step}; return a number, a scalar tensor or None")


def _step_seed(seed, step):
    return (int(seed) * 1_000_003 + step) % (2 ** 63)


def run_steps(make_state, step_fn, steps, path, every, seed):
    """The loop each worker runs (also usable in one process, a world of one): build the
    state, resume from ``path`` if it exists, run the remaining steps, checkpoint every
    ``every`` steps. Rank 0 returns ``{"state", "history"}``; the other ranks return None."""
    from ..tensor.checkpoint import load, save
    from ..tensor.random import manual_seed
    from . import collectives, runtime
    rank = runtime.rank()
    manual_seed(seed)
    state = make_state()
    if not isinstance(state, dict) or not all(
            hasattr(v, "state_dict") and hasattr(v, "load_state_dict") for v in state.values()):
        raise DistError("train_with_checkpoints: make_state() must return a dict of name -> "
                        "object with state_dict() and load_state_dict() (models, optimisers)")
    start, history = 0, []
    if os.path.exists(path):
        saved = load(path)
        if not isinstance(saved, dict) or any(k not in saved for k in CHECKPOINT_KEYS):
            raise DistError(f"train_with_checkpoints: {path} is not a checkpoint of "
                            f"train_with_checkpoints (keys {', '.join(CHECKPOINT_KEYS)})")
        if set(saved["state"]) != set(state):
            raise DistError(f"train_with_checkpoints: the checkpoint at {path} holds "
                            f"{sorted(saved['state'])}, make_state() built {sorted(state)}; "
                            f"use the same names (or another path for a new run)")
        if int(saved["step"]) > steps:
            raise DistError(f"train_with_checkpoints: the checkpoint at {path} is at step "
                            f"{saved['step']}, past steps={steps}; ask for at least as many")
        for name, obj in state.items():
            obj.load_state_dict(saved["state"][name])
        start, history = int(saved["step"]), list(saved["history"])[:int(saved["step"])]
    for step in range(start, steps):
        manual_seed(_step_seed(seed, step))
        history.append(_history_value(step_fn(state, step), step))
        done = step + 1
        if done % every == 0 or done == steps:
            if rank == 0:
                save({"step": done, "world_size": runtime.world_size(), "history": history,
                      "state": {name: obj.state_dict() for name, obj in state.items()}}, path)
            collectives.barrier()       # nobody runs ahead of a checkpoint not yet written
    if rank != 0:
        return None
    return {"state": {name: obj.state_dict() for name, obj in state.items()},
            "history": history}
