"""labkit's benchmark suite: the same workloads in labkit, plain NumPy and PyTorch.

Run ``python benchmarks/run.py`` (``--help`` for options); results go to ``BENCHMARKS.md``.
"""
