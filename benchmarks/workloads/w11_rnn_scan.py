"""W11 RNN with lk.scan: W6's step (tanh cell, input 64, hidden 128, 50 steps, batch 32, readout
and cross-entropy on the last state, backward through time, SGD) with its time loop written as
``lk.scan``, as the control-flow tutorial teaches.

Eagerly ``lk.scan`` is a Python loop; captured it is one ``scan`` node whose body is planned once
and run 50 times (and a ``scan_grad`` node for the backward). W6's captured column is the same
step with the loop unrolled at trace time: the two compare a compiled loop with an unrolled one.
PyTorch runs the same Python loop as in W6 (it has no scan).
"""
from ..common import Registry, register_labkit_trainers
from . import w6_rnn

NAME = "W11"
TITLE = ("W6's tanh RNN (input 64, hidden 128, 50 steps, batch 32) with its time loop as "
         "lk.scan, BPTT, SGD")
UNIT = w6_rnn.UNIT
IMPLS = Registry()
data, metric, params = w6_rnn.data, w6_rnn.metric, w6_rnn.params


def _labkit_loss(w_ih, w_hh, b, w_out, b_out, x, h, y):
    import labkit as lk

    def cell(h, x_t):
        h = lk.tanh(x_t @ w_ih + h @ w_hh + b)
        return h, None
    h, _ = lk.scan(cell, h, x)
    return lk.nn.functional.cross_entropy(h @ w_out + b_out, y)


register_labkit_trainers(IMPLS, params, ("x", "h0", "y"), _labkit_loss)
IMPLS.register("torch")(w6_rnn.torch_impl)
