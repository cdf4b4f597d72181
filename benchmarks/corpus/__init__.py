"""The corpus of public PyTorch programs in ``examples/programs``, run on PyTorch and on labkit."""
