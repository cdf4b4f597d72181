"""Cases for ``check_all``, the op that raises when values break a condition (``lk.distributions``
validates with it): true values pass through as True; a failing check is tested in
tests/distributions/test_validation_and_capture.py."""
import numpy as np
from hypothesis import strategies as st

from labkit.tensor.ops.checks import check_all

from ..case_kit import UNARY_EDGES, Case, Sample, normal, shapes


PRIMITIVE_CASES = [
    Case("check_all", lambda x: check_all(x, x == x, message="x must not be NaN"),
         lambda x: np.asarray(True), lambda rng, shape: Sample((normal(rng, shape),)),
         st.fixed_dictionaries({"shape": shapes()}), UNARY_EDGES, op="check_all",
         differentiable=False),
]
