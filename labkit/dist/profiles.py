"""Every rank's profile in one picture: ``merge_profiles`` turns the ``lk.profile()`` each rank
recorded (returned from ``launch`` or ``Cluster.run``, in rank order) into one ``Profile`` with a
track per rank, for ``lk.viz.timeline``. Each rank keeps its lanes: its ops on ``main``,
``DataParallel``'s bucket allreduces on ``allreduce`` (so a bucket reducing while backward
still runs shows as two bars one above the other).

Hosts have their own clocks, so each rank's events are timed from the start of its own
profile: start every rank's profile right after ``lk.dist.barrier()`` and the starts line up
to within the barrier's release.

>>> import labkit as lk
>>> with lk.profile() as prof:
...     _ = lk.ones(2) + 1
>>> merged = merge_profiles([prof, prof])
>>> sorted({e.device for e in merged.events}), merged.start_ns
(['rank 0', 'rank 1'], 0)
"""
from ..profiler.events import OpEvent
from ..profiler.profile import Profile
from .errors import DistError


def merge_profiles(profiles):
    """One ``Profile`` from each rank's (a list in rank order): the events of rank ``r`` on a
    track named ``"rank r"``, in their own lanes, timed from that rank's profile start; the
    step marks are rank 0's."""
    profiles = list(profiles)
    bad = [type(p).__name__ for p in profiles if not isinstance(p, Profile)]
    if not profiles or bad:
        raise DistError(f"lk.dist.merge_profiles: give each rank's lk.profile() (a list in "
                        f"rank order, as launch returns them), got "
                        f"{', '.join(bad) or 'an empty list'}")
    merged = Profile()
    for rank, prof in enumerate(profiles):
        start = prof.start_ns if prof.start_ns is not None else min(
            (e.start_ns for e in prof.events), default=0)
        for e in prof.events:
            merged.events.append(OpEvent(e.op, e.name, f"rank {rank}", e.lane,
                                         e.start_ns - start, e.start_ns - start + e.duration_ns,
                                         e.bytes_in, e.bytes_out, e.step, e.source))
        if rank == 0:
            merged.step_marks = [(s, t - start) for s, t in prof.step_marks]
            merged.step_number = prof.step_number
    merged.start_ns = 0
    merged.end_ns = max((e.end_ns for e in merged.events), default=0)
    return merged
