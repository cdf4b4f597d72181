"""``torch._dynamo.exc``: ``Unsupported`` (a graph break under ``fullgraph=True``) and
``InvalidBackend``."""
from ..graph.compiled import InvalidBackend
from ..graph.symbolic import GraphBreak

Unsupported = GraphBreak

__all__ = ["Unsupported", "InvalidBackend"]
