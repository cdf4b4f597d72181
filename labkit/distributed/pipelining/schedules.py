"""Pipeline schedules: in which order each device runs the forward and backward of each
micro-batch on its stages. PyTorch's ``ScheduleGPipe``, ``Schedule1F1B``,
``ScheduleInterleaved1F1B``, and ``step(*inputs, target=..., losses=[...])``.

- GPipe: every micro-batch forward, then every backward. Each stage holds the activations of
  all ``m`` micro-batches at once.
- 1F1B: after ``p - s - 1`` warm-up forwards, stage ``s`` alternates one forward and one
  backward, so it holds at most ``p - s`` micro-batches' activations; the same bubble.
- Interleaved 1F1B: each device holds ``v`` stages (chunks of layers), which fills the bubble
  ``v`` times better: ``(p-1)/(v m + p - 1)`` instead of ``(p-1)/(m + p - 1)``.

A schedule is first a list of actions per device; ``pipeline_order`` lays them out in rounds (a
round: each device runs at most one action whose inputs are ready) the way PyTorch prints it,
with ``None`` where a device idles: the bubble, ``bubble_fraction()``. ``step`` then runs the
actions in that order, one process holding every stage (virtual devices, or GPUs of one
machine), and times each one: ``timeline()`` places the measured actions as if each device
ran on its own (every action starts when its device is free and its input has arrived), the
bubbles marked, for ``lk.viz.timeline``.

Gradients are those of the whole batch: each micro-batch's loss is seeded with ``1 / m``
(PyTorch's ``scale_grads=True``), so with a mean loss the parameters get the gradient of the
mean over the whole batch, as on one device.
"""
import time

from ...profiler.events import now_ns
from ...profiler.profile import Profile, active_profile
from ...tensor.ops.shape import concat
from ...tensor.tensor import Tensor


class Action:
    """``F`` (forward) or ``B`` (backward) of micro-batch ``mb`` on stage ``stage``."""

    __slots__ = ("kind", "stage", "mb")

    def __init__(self, kind, stage, mb):
        self.kind, self.stage, self.mb = kind, stage, mb

    def __repr__(self):
        return f"{self.stage}{self.kind}{self.mb}"

    def __eq__(self, other):
        return isinstance(other, Action) and (self.kind, self.stage, self.mb) == (
            other.kind, other.stage, other.mb)

    def __hash__(self):
        return hash((self.kind, self.stage, self.mb))


def _split(value, m):
    """``value`` cut into ``m`` micro-batches along dim 0 (non-tensors repeated)."""
    if not isinstance(value, Tensor):
        return [value] * m
    n = value.shape[0]
    if n % m:
        raise ValueError(f"a batch of {n} does not split into {m} equal micro-batches")
    size = n // m
    return [value[i * size:(i + 1) * size] for i in range(m)]


class PipelineSchedule:
    """What every schedule shares: the stages, the micro-batch count, running the actions,
    and reading what happened. Subclasses give ``_device_actions(d)``."""

    def __init__(self, stages, n_microbatches, loss_fn=None, scale_grads=True):
        from .stage import PipelineStage
        self.stages = list(stages) if isinstance(stages, (list, tuple)) else [stages]
        if not all(isinstance(s, PipelineStage) for s in self.stages):
            raise TypeError("a schedule runs PipelineStage objects")
        n = self.stages[0].num_stages
        if len(self.stages) != n:
            raise NotImplementedError(
                f"{type(self).__name__}: give every stage of the pipeline ({n}, one process "
                f"runs them all on its devices); a schedule over MPI ranks, each with its own "
                f"stage, is not implemented in labkit")
        self.stages.sort(key=lambda s: s.stage_index)
        self.n_microbatches = int(n_microbatches)
        self.loss_fn = loss_fn
        self.scale_grads = scale_grads
        self.devices = []
        for s in self.stages:
            if s.device not in self.devices:
                self.devices.append(s.device)
        self.records = []          # (action, device, start_ns, end_ns, bytes held after)
        self.cpu_ns = []           # the process's CPU time each action took (same order)
        self.order = self._rounds()

    # ---- the plan -----------------------------------------------------------------------------
    @property
    def num_stages(self):
        return len(self.stages)

    def _device_of(self, stage):
        return self.stages[stage].device

    def _device_actions(self, d):
        raise NotImplementedError

    def _rounds(self):
        """The actions in rounds: each round, every device runs its next action if what it
        needs is done (the previous stage's forward of that micro-batch, the next stage's
        backward of it)."""
        lists = [list(self._device_actions(d)) for d in range(len(self.devices))]
        done, rounds = set(), []
        last = self.num_stages - 1
        while any(lists):
            row = []
            for actions in lists:
                a = actions[0] if actions else None
                ready = a is not None and (
                    (a.kind == "F" and (a.stage == 0 or Action("F", a.stage - 1, a.mb) in done))
                    or (a.kind == "B" and Action("F", a.stage, a.mb) in done and
                        (a.stage == last or Action("B", a.stage + 1, a.mb) in done)))
                row.append(a if ready else None)
            if not any(row):
                raise RuntimeError(f"{type(self).__name__}: the schedule waits on itself "
                                   f"(next actions {[l[0] for l in lists if l]})")
            for actions, a in zip(lists, row):
                if a is not None:
                    actions.pop(0)
            done.update(a for a in row if a is not None)
            rounds.append(row)
        return rounds

    @property
    def pipeline_order(self):
        """``{device index: [action or None per round]}`` (PyTorch's ``pipeline_order``)."""
        return {d: [row[d] for row in self.order] for d in range(len(self.devices))}

    def format_pipeline_order(self):
        """The rounds as a table: one column per device, one line per round ('-': idle)."""
        head = "round  " + " ".join(f"{d.name:>8}" for d in self.devices)
        lines = [head]
        for i, row in enumerate(self.order):
            lines.append(f"{i:>5}  " + " ".join(f"{repr(a) if a else '-':>8}" for a in row))
        return "\n".join(lines)

    def bubble_fraction(self):
        """The share of device-rounds spent idle, counting a forward and a backward as one
        round each (the textbook's ``(p-1)/(m+p-1)`` for GPipe and 1F1B)."""
        slots = len(self.order) * len(self.devices)
        busy = sum(1 for row in self.order for a in row if a is not None)
        return 1 - busy / slots

    # ---- running ------------------------------------------------------------------------------
    def step(self, *args, target=None, losses=None, **kwargs):
        """One pass of the whole batch: ``args`` (the first stage's inputs) and ``target``
        (the last stage's, for ``loss_fn(output, target)``) cut into micro-batches, every
        action run in the schedule's order. Appends each micro-batch's loss to ``losses``;
        returns the last stage's output for the whole batch."""
        m = self.n_microbatches
        inputs = [_split(a, m) for a in args]
        targets = _split(target, m) if target is not None else [None] * m
        for s in self.stages:
            s.reset()
        outputs, grads, mb_losses, results = {}, {}, {}, {}
        self.records, self.cpu_ns = [], []
        scale = 1.0 / m if self.scale_grads else 1.0
        last = self.num_stages - 1
        for row in self.order:
            for d, a in enumerate(row):
                if a is None:
                    continue
                stage = self.stages[a.stage]
                start, cpu = now_ns(), time.process_time_ns()
                if a.kind == "F":
                    given = tuple(x[a.mb] for x in inputs) if a.stage == 0 else \
                        outputs.pop((a.stage - 1, a.mb))
                    out = stage.forward_one_chunk(a.mb, given)
                    if a.stage == last:
                        results[a.mb] = out[0] if len(out) == 1 else out
                        if self.loss_fn is not None:
                            t = targets[a.mb]
                            if isinstance(t, Tensor):
                                t = t.to(stage.device)     # the target, to the last stage
                            mb_losses[a.mb] = self.loss_fn(results[a.mb], t)
                    else:
                        outputs[(a.stage, a.mb)] = out
                else:
                    if a.stage == last:
                        got = stage.backward_one_chunk(a.mb, loss=mb_losses[a.mb], scale=scale)
                    else:
                        got = stage.backward_one_chunk(a.mb, grads=grads.pop((a.stage, a.mb)))
                    if a.stage > 0:
                        grads[(a.stage - 1, a.mb)] = got
                self.records.append((a, stage.device.name, start, now_ns(), stage.held_bytes))
                self.cpu_ns.append(time.process_time_ns() - cpu)
        self._sync_tied()
        record_in_profile(self)
        if losses is not None:
            losses.extend(mb_losses[i] for i in range(m))
        outs = [results[i] for i in range(m)]
        if all(isinstance(o, Tensor) for o in outs):
            return concat(*outs, dim=0)
        return outs

    def _sync_tied(self):
        """Parameters tied across stages (an embedding and the output layer that shares it):
        each stage holds a copy; the copies' gradients are summed, so they take one step."""
        groups = {}
        for s in self.stages:
            for key, p in s.tied.items():
                groups.setdefault(key, []).append(p)
        for copies in groups.values():
            grads = [p.grad for p in copies if p.grad is not None]
            if len(copies) < 2 or not grads:
                continue
            total = grads[0]
            for g in grads[1:]:
                total = total + g.to(total.device)
            for p in copies:
                p.grad = total.to(p.device)

    # ---- reading --------------------------------------------------------------------------------
    def peak_activation_bytes(self):
        """The most bytes each stage's pending micro-batches held for backward at once."""
        return {s.stage_index: s.peak_held_bytes for s in self.stages}

    def timeline(self, durations="measured"):
        """The last ``step`` as a profile: each action placed as if every device ran on its
        own (it starts when its device is free and its input is done); a lane per device,
        ``bubble`` events where a device waits. Its ``measured_bubble_fraction``.

        ``durations``: ``"measured"``, each action takes the (wall-clock) time it took;
        ``"cpu"``, the CPU time it took (what it would take on a device of its own, without
        the other processes of a shared machine); ``"median"``, the median CPU time of its
        stage's actions of its kind (forward or backward), which a stray pause of the host
        (the garbage collector) does not move either; or a mapping ``{"F": t, "B": t}``,
        every forward and every backward taking the time given (in nanoseconds), to see
        the schedule alone: ``schedule.timeline({"F": 1, "B": 2})`` gives the textbook
        bubble ``(p - 1) / (m + p - 1)`` exactly."""
        if isinstance(durations, dict):
            missing = {"F", "B"} - set(durations)
            if missing:
                raise ValueError(f"timeline(durations=...): the mapping needs a time for "
                                 f"{sorted(missing)}; give {{'F': ..., 'B': ...}}")
        elif durations not in ("measured", "cpu", "median"):
            raise ValueError(f"timeline(durations={durations!r}): expected 'measured', 'cpu', "
                             f"'median' or a mapping {{'F': ..., 'B': ...}}")
        prof = Profile()
        free = {d.name: 0 for d in self.devices}
        end_of = {}
        last = self.num_stages - 1
        cpu = {id(r): c for r, c in zip(self.records, self.cpu_ns)}
        typical = {}
        if durations == "median":
            times = {}
            for r in self.records:
                times.setdefault((r[0].stage, r[0].kind), []).append(cpu[id(r)])
            typical = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
        for r in sorted(self.records, key=lambda r: r[2]):
            a, device, start, end, _ = r
            if isinstance(durations, dict):
                start, end = 0, durations[a.kind]
            elif durations == "median":
                start, end = 0, typical[(a.stage, a.kind)]
            elif durations == "cpu":
                start, end = 0, cpu[id(r)]
            need = []
            if a.kind == "F" and a.stage > 0:
                need.append(end_of[Action("F", a.stage - 1, a.mb)])
            if a.kind == "B":
                need.append(end_of[Action("F", a.stage, a.mb)])
                if a.stage < last:
                    need.append(end_of[Action("B", a.stage + 1, a.mb)])
            begin = max([free[device]] + need)
            if begin > free[device]:
                prof.record("bubble", "bubble", device, free[device], begin, lane="stage")
            finish = begin + (end - start)
            prof.record("forward" if a.kind == "F" else "backward",
                        f"stage {a.stage} micro-batch {a.mb}", device, begin, finish,
                        lane="stage")
            free[device] = end_of[a] = finish
        span = max(free.values())
        for d, t in free.items():
            if t < span:
                prof.record("bubble", "bubble", d, t, span, lane="stage")
        busy = sum(e.duration_ns for e in prof.events if e.op != "bubble")
        prof.start_ns, prof.end_ns = 0, span
        prof.measured_bubble_fraction = 1 - busy / (span * len(self.devices)) if span else 0.0
        return prof


class ScheduleGPipe(PipelineSchedule):
    """All forwards, then all backwards (in micro-batch order)."""

    def _device_actions(self, d):
        mine = [s.stage_index for s in self.stages if s.device is self.devices[d]]
        out = [Action("F", s, mb) for mb in range(self.n_microbatches) for s in mine]
        out += [Action("B", s, mb) for mb in range(self.n_microbatches)
                for s in reversed(mine)]
        return out


class Schedule1F1B(PipelineSchedule):
    """``p - s - 1`` warm-up forwards, then one forward and one backward in turn, then the
    remaining backwards (PipeDream-flush, Megatron's default)."""

    def _device_actions(self, d):
        stage = next(s.stage_index for s in self.stages if s.device is self.devices[d])
        m, p = self.n_microbatches, self.num_stages
        warm = min(p - stage - 1, m)
        out = [Action("F", stage, i) for i in range(warm)]
        f, b = warm, 0
        while b < m:
            if f < m:
                out.append(Action("F", stage, f))
                f += 1
            out.append(Action("B", stage, b))
            b += 1
        return out


class ScheduleInterleaved1F1B(PipelineSchedule):
    """Each device holds several stages (stage ``c * p + d`` on device ``d``): forwards go
    through a group of ``p`` micro-batches chunk after chunk, backwards the other way
    (Megatron's interleaved schedule; ``m`` a multiple of the device count)."""

    def _device_actions(self, d):
        p = len(self.devices)
        m = self.n_microbatches
        mine = [s.stage_index for s in self.stages if s.device is self.devices[d]]
        v = len(mine)
        if m % p:
            raise ValueError(f"ScheduleInterleaved1F1B: {m} micro-batches must be a multiple "
                             f"of the {p} devices")
        forwards = [Action("F", mine[c], g + i) for g in range(0, m, p) for c in range(v)
                    for i in range(p)]
        backwards = [Action("B", mine[c], g + i) for g in range(0, m, p)
                     for c in reversed(range(v)) for i in range(p)]
        warm = min((p - d - 1) * 2 + (v - 1) * p, len(forwards))
        out = forwards[:warm]
        f, b = warm, 0
        while b < len(backwards):
            if f < len(forwards):
                out.append(forwards[f])
                f += 1
            out.append(backwards[b])
            b += 1
        return out


def record_in_profile(schedule):
    """Put the last step's measured actions in the open ``lk.profile()`` (as they ran)."""
    prof = active_profile()
    if prof is None:
        return
    for a, device, start, end, _ in schedule.records:
        prof.record("forward" if a.kind == "F" else "backward",
                    f"stage {a.stage} micro-batch {a.mb}", device, start, end, lane="stage")
