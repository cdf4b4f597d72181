"""Which ONNX ops each labkit op becomes: one converter per labkit op name.

A converter is ``fn(b, node, ins) -> value name(s)``: ``b`` is the ``GraphBuilder`` writing the
ONNX graph, ``node`` the labkit graph node, ``ins`` one ONNX value name per input of the node
(Python literals made constants). It returns the name of the node's value, or a tuple for a
control-flow node with several. A researcher who declared an op of their own registers its
converter the same way the built-in ones are:

>>> import labkit as lk
>>> @lk.onnx.converter("my_cube")
... def _cube(b, node, ins):
...     square = b.emit("Mul", [ins[0], ins[0]])
...     return b.emit("Mul", [square, ins[0]])
"""
CONVERTERS = {}


def converter(*names):
    """Decorator registering ``fn`` as the ONNX converter of the labkit ops ``names``."""
    def register(fn):
        for name in names:
            CONVERTERS[name] = fn
        return fn
    return register
