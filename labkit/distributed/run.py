"""``python -m labkit.distributed.run``: torchrun's module path (``python -m
torch.distributed.run``) for ``python -m labkit.dist.run``, the same launcher.

    python -m labkit.distributed.run --standalone --nproc_per_node=2 train.py
"""
import sys

from ..dist.run import main

if __name__ == "__main__":
    sys.exit(main())
