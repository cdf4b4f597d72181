"""``lk.dist.merge_profiles``: each rank's profile on a track of its own, in its own lanes, timed
from its own start (hosts' clocks differ); anything but a list of profiles is refused."""
import pytest

import labkit as lk
from labkit.profiler.profile import Profile


def _profile(start, events, marks=()):
    prof = Profile()
    prof.start_ns, prof.end_ns = start, start + 1000
    for op, lane, a, b in events:
        prof.record(op, op, "cpu:0", start + a, start + b, 8, 8, lane=lane)
    prof.step_marks = [(s, start + t) for s, t in marks]
    return prof


def test_each_rank_is_a_track_timed_from_its_own_start():
    rank0 = _profile(5_000, [("matmul", "main", 0, 40), ("allreduce", "allreduce", 10, 90)],
                     marks=[(0, 100)])
    rank1 = _profile(987_654, [("matmul", "main", 2, 50)])
    merged = lk.dist.merge_profiles([rank0, rank1])
    got = [(e.device, e.lane, e.op, e.start_ns, e.end_ns, e.bytes_in) for e in merged.events]
    assert got == [("rank 0", "main", "matmul", 0, 40, 8),
                   ("rank 0", "allreduce", "allreduce", 10, 90, 8),
                   ("rank 1", "main", "matmul", 2, 50, 8)]
    assert merged.step_marks == [(0, 100)]
    assert (merged.start_ns, merged.end_ns) == (0, 90)
    assert lk.viz.timeline(merged) is not None


def test_only_a_list_of_profiles_is_merged():
    with pytest.raises(lk.dist.DistError, match="give each rank's lk.profile"):
        lk.dist.merge_profiles([])
    with pytest.raises(lk.dist.DistError, match="got dict"):
        lk.dist.merge_profiles([{"events": []}])
