"""``labkit.distributed.pipelining``: pipeline parallelism in PyTorch's spelling: ``pipeline``
and ``SplitPoint`` (cut a model into stages), ``PipelineStage``, and the schedules
``ScheduleGPipe``, ``Schedule1F1B``, ``ScheduleInterleaved1F1B`` (micro-batches, the loss on the
last stage). See ``schedules`` for what each does and how their bubbles are measured."""
from .pipe import Pipe, SplitPoint, pipeline
from .schedules import (Action, PipelineSchedule, Schedule1F1B, ScheduleGPipe,
                        ScheduleInterleaved1F1B)
from .stage import PipelineStage

__all__ = ["Action", "Pipe", "PipelineSchedule", "PipelineStage", "Schedule1F1B",
           "ScheduleGPipe", "ScheduleInterleaved1F1B", "SplitPoint", "pipeline"]
