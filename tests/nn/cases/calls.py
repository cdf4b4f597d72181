"""Helpers of the module cases (no cases here): calls the harness cannot spell, inputs and
masks."""
import numpy as np


def wrapped(build, call):
    """A module holding ``build(nn)`` as ``m`` whose forward is ``call(nn, m, *inputs)`` (for
    calls the harness cannot spell: state pairs, packing)."""
    def make(nn):
        class Wrapped(nn.Module):
            def __init__(self):
                super().__init__()
                self.m = build(nn)

            def forward(self, *inputs):
                return call(nn, self.m, *inputs)
        return Wrapped()
    return make


def padding(n, s, seed=0):
    """A key padding mask (n, s), True at padded keys; every row keeps its first key."""
    m = np.random.default_rng(seed).random((n, s)) < 0.4
    m[:, 0] = False
    return m


def causal_float(n):
    return np.triu(np.full((n, n), -np.inf), 1)


def attention_mask(l, s, seed=1):
    """A bool attention mask (l, s), True where a query may not attend (never a whole row)."""
    m = np.random.default_rng(seed).random((l, s)) < 0.4
    m[:, 1] = False
    return m


def inputs(*arrays_or_values):
    """Inputs: shapes (tuples) become standard normal arrays; other values pass as they are."""
    def make(rng):
        return tuple(rng.standard_normal(a) if isinstance(a, tuple) else a
                     for a in arrays_or_values)
    return make
