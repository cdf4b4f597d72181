"""Graphs: the IR, capture (``lk.function``, explicit graphs), the executor, graph gradients."""
from .capture import name_scope, placeholder
from .function import Function, function
from .gradients import gradients
from .ir import Graph, GraphError, Node
from .symbolic import SymbolicTensor, TracingError

__all__ = ["Function", "Graph", "GraphError", "Node", "SymbolicTensor", "TracingError",
           "function", "gradients", "name_scope", "placeholder"]
