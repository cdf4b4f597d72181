"""Tensor parallelism in PyTorch's spelling: ``parallelize_module`` with ``ColwiseParallel``,
``RowwiseParallel``, ``SequenceParallel``, ``PrepareModuleInput``, ``PrepareModuleOutput``."""
from .api import parallelize_module
from .style import (ColwiseParallel, ParallelStyle, PrepareModuleInput, PrepareModuleOutput,
                    RowwiseParallel, SequenceParallel)

__all__ = ["ColwiseParallel", "ParallelStyle", "PrepareModuleInput", "PrepareModuleOutput",
           "RowwiseParallel", "SequenceParallel", "parallelize_module"]
