"""Graph optimisation passes: each a function Graph -> Graph, testable alone, switchable by name.

The default pipeline, in order:

==================  ==========================================================================
``prune``           keep only what the outputs and the side effects need
``constant_folding`` compute what depends on constants alone, once, before running
``cse``             compute each distinct value once (common-subexpression elimination)
``dce``             forward no-ops to their input, drop values nobody uses
``arithmetic``      the same value with less work: ``(A @ B) * s`` becomes ``A @ (B * s)``
``matmul_update``   ``w -= (a @ b) * s`` becomes one GEMM accumulating into ``w`` (BLAS beta=1)
``fusion``          chains of elementwise ops become one kernel (numexpr / a CUDA kernel)
``memory``          results are written into buffers whose last use has passed (``out=``)
==================  ==========================================================================

Two more passes deal with devices (``DEVICE_PASSES``): ``placement`` gives every node a device
and a reason (explicit ``lk.device`` requests, colocation, a cost heuristic), and
``partition`` puts a Send/Recv pair on every edge between devices. ``labkit.graph.compile``,
the one path from a graph to a plan, places a graph before the pipeline when it asks for it (an
explicit request or colocation, or nodes on several devices), so ``f.graph(*args)`` shows where
each node runs, and partitions it after the pipeline (``passes.partition(g)`` shows the
result).

Each pass returns a new graph and leaves its input alone; the new graph's ``history`` ends with
a ``PassRecord`` saying what the pass removed, merged, folded, fused or reused, by node name, so
a notebook can step through them::

    for name, g in passes.stages(graph):
        print(g.history[-1].summary())

``lk.function`` runs the pipeline on every trace: ``f.graph(*args)`` is the optimised graph,
``f.graph(*args, passes=[])`` the raw one, ``f.graph(*args, passes=["cse", "dce"])`` the raw one
after just those passes. ``lk.config.disable_pass("fusion")`` switches a pass off everywhere.

What every pass keeps true: side effects (stateful nodes such as ``assign``, control-flow nodes)
are never removed, merged or reordered; captures are read by reference at run time, so they are
never folded, and reads of them are not moved across a side effect; the graph's outputs (for
``lk.function``: its results and the ``.grad`` s it sets) stay computable; placeholders stay.
Control-flow nodes (whose attributes hold sub-graphs) are opaque: passes neither look inside
nor move them.

>>> import labkit as lk
>>> from labkit.graph import passes
>>> with lk.Graph() as g:
...     x = lk.placeholder((4,), name="x")
...     y = ((x * 2.0).exp() + 1.0).tanh() * (x * 2.0)
>>> opt = passes.run_passes(g, outputs=[y])
>>> for record in opt.history:
...     print(record.summary())
prune: 7 -> 7 nodes; no change
constant_folding: 7 -> 7 nodes; no change
cse: 7 -> 6 nodes; merged 1
dce: 6 -> 6 nodes; no change
arithmetic: 6 -> 6 nodes; no change
matmul_update: 6 -> 6 nodes; no change
fusion: 6 -> 3 nodes; fused 1
memory: 3 -> 3 nodes; no change
>>> print(opt.listing().splitlines()[-1].split(":")[0].strip())
%2 = fused(%1, program=<tanh(exp(x0) + 1.0) * x0>)
"""
from .base import (DEVICE_PASSES, PASSES, PIPELINE, GraphPass, PassRecord, Rewriter,
                   default_passes, graph_pass, history_text, run_passes, stages, with_outputs)
from .arithmetic import arithmetic
from .constant_folding import constant_folding
from .cse import cse
from .dce import dce
from .fusion import FusedProgram, fusion
from .matmul_update import matmul_update
from .memory import BufferPlan, memory, plan_buffers
from .prune import prune
from .placement import PlacementError, kernel_devices, placement, set_kernel_devices
from .partition import partition

__all__ = ["PASSES", "PIPELINE", "BufferPlan", "FusedProgram", "GraphPass", "PassRecord",
           "Rewriter", "arithmetic", "constant_folding", "cse", "dce", "default_passes", "fusion",
           "graph_pass", "history_text", "matmul_update", "memory", "plan_buffers", "prune",
           "run_passes",
           "stages"]
__all__ += ["DEVICE_PASSES", "PlacementError", "kernel_devices", "partition", "placement",
            "set_kernel_devices"]
