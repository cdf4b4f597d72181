"""Utilities for models, as ``torch.nn.utils``: ``rnn`` (padded and packed sequences)."""
from . import rnn

__all__ = ["rnn"]
