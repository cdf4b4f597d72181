"""``torch.backends.cudnn``: labkit's kernels do not call cuDNN, so its switches (``enabled``,
``benchmark``, ``deterministic``, ``allow_tf32``) may be set as PyTorch programs do and change
nothing; labkit's results are deterministic for a seed either way, and its float32 convolutions
run in full float32 precision."""

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True       # PyTorch's default; accepted, no effect (no TF32 in labkit)


def is_available():
    """Always False: labkit's convolutions are its own kernels, not cuDNN's."""
    return False
