"""The handwritten-digits set that scikit-learn ships (1,797 8x8 greyscale images, 10 classes),
read from the installed package: nothing is downloaded."""
import numpy as np

from ..tensor.creation import tensor as _tensor
from .dataset import TensorDataset


def digits(test_fraction=0.2, seed=0, device=None):
    """(train, test) TensorDatasets of (image, label) pairs from ``sklearn.datasets.load_digits``.

    Images are float32 of shape (1, 8, 8) scaled to [0, 1]; labels are int64 in 0..9. The split
    is a shuffle with ``seed`` followed by a cut, so it is the same on every machine.

    >>> import labkit as lk
    >>> train, test = lk.data.digits()
    >>> len(train), len(test), train.tensors[0].shape[1:], train.tensors[1].dtype
    (1438, 359, (1, 8, 8), lk.int64)
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"digits: test_fraction must be between 0 and 1 (exclusive), got "
                         f"{test_fraction}")
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise ImportError("lk.data.digits() reads the digits set shipped with scikit-learn: "
                          "install it with  pip install scikit-learn") from None
    raw = load_digits()
    images = (raw.images.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
    labels = raw.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(labels))
    n_test = int(round(len(labels) * test_fraction))
    test_ids, train_ids = order[:n_test], order[n_test:]

    def part(ids):
        return TensorDataset(_tensor(images[ids], device=device),
                             _tensor(labels[ids], device=device))
    return part(train_ids), part(test_ids)
