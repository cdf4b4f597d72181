"""Checks of values as ops: ``check_all`` raises when a condition fails, eagerly at once and in
a captured function when the graph runs (it is stateful, so it runs though nothing reads it),
as TensorFlow's assert ops do. ``lk.distributions`` validates parameters and samples with it.
"""
from ...errors import ConstraintError
from ..dtypes import bool_
from ..op import op


def _check_rule(value, ok, message):
    return (), bool_


def _check_batch(inputs, bdims, message):
    return check_all(*inputs, message=message), None     # every example checked at once


@op("check_all", shape=_check_rule, vjp=None, stateful=True, batch=_check_batch)
def check_all(xp, value, ok, message):
    """True (0-d) if every element of the bool ``ok`` is true; otherwise ConstraintError (a
    ValueError) saying ``message`` and showing ``value``."""
    if not bool(ok.all()):
        raise ConstraintError(f"{message}, but found invalid values:\n{value}")
    return xp.asarray(True)
