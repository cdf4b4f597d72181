"""Graphs: the IR, capture (``lk.function``, explicit graphs), the executor, graph gradients."""
from ..errors import GraphError
from .capture import name_scope, placeholder
from .control_flow import cond, scan, while_loop
from .frozen import FrozenValueWarning
from .function import Function, function
from .gradients import gradients
from .ir import Graph
from .node import Node
from .symbolic import SymbolicTensor, TracingError

__all__ = ["FrozenValueWarning", "Function", "Graph", "GraphError", "Node", "SymbolicTensor", "TracingError",
           "function", "gradients", "name_scope", "placeholder"]
__all__ += ["cond", "scan", "while_loop"]
from .variables import Variable, restore_variables, save_variables  # noqa: E402
from .queues import FIFOQueue, QueueClosedError, QueueTimeoutError  # noqa: E402
__all__ += ["Variable", "save_variables", "restore_variables", "FIFOQueue", "QueueClosedError",
            "QueueTimeoutError"]
