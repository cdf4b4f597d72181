"""``torch.backends.mps``: Apple's Metal GPUs, which labkit does not run on."""


def is_available():
    """Always False: labkit has no Metal (MPS) backend; its devices are 'cpu' and 'gpu' (CUDA)."""
    return False


def is_built():
    """Always False: labkit is not built with Metal (MPS) support."""
    return False
