"""Datasets and DataLoader: batching, shuffling with a seed, drop_last, collation, progress bar;
digits(): shapes, dtypes, scaling and a deterministic split."""
import numpy as np
import pytest

import labkit as lk
from labkit.data import DataLoader, Dataset, TensorDataset


def numbered(n=10):
    return TensorDataset(lk.arange(n).float().reshape(n, 1) * 10, lk.arange(n))


def labels_of(loader):
    return [y.tolist() for _, y in loader]


def test_tensor_dataset():
    ds = numbered(5)
    assert len(ds) == 5
    x, y = ds[3]
    assert x.tolist() == [30.0] and y.item() == 3
    assert repr(ds) == "TensorDataset(5 samples: (1,) float32, () int64)"
    assert TensorDataset(np.zeros((4, 2)), np.arange(4)).tensors[1].dtype is lk.int64
    with pytest.raises(lk.ShapeError, match="same size in dimension 0"):
        TensorDataset(lk.zeros(4, 2), lk.zeros(5))


def test_batches_in_order_with_and_without_drop_last():
    loader = DataLoader(numbered(10), batch_size=4)
    assert len(loader) == 3
    assert labels_of(loader) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    x, y = next(iter(loader))
    assert x.shape == (4, 1) and x.dtype is lk.float32 and y.dtype is lk.int64
    assert not x.requires_grad
    dropped = DataLoader(numbered(10), batch_size=4, drop_last=True)
    assert len(dropped) == 2 and labels_of(dropped) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(DataLoader(numbered(8), batch_size=4, drop_last=True)) == 2
    assert labels_of(DataLoader(numbered(3))) == [[0], [1], [2]]


def test_shuffle_with_seed_is_reproducible_and_new_each_epoch():
    a = DataLoader(numbered(20), batch_size=6, shuffle=True, seed=7)
    b = DataLoader(numbered(20), batch_size=6, shuffle=True, seed=7)
    first, second = labels_of(a), labels_of(a)
    assert first == labels_of(b) and second == labels_of(b)     # same sequence of epochs
    assert first != second                                       # a new order each epoch
    for epoch in (first, second):
        assert sorted(sum(epoch, [])) == list(range(20))         # every sample exactly once
        assert [len(batch) for batch in epoch] == [6, 6, 6, 2]
    assert labels_of(DataLoader(numbered(20), batch_size=6, shuffle=True, seed=8)) != first
    x, y = next(iter(DataLoader(numbered(20), batch_size=5, shuffle=True, seed=1)))
    np.testing.assert_array_equal(x.numpy()[:, 0], y.numpy() * 10.0)   # fields stay paired
    dropped = DataLoader(numbered(20), batch_size=6, shuffle=True, seed=7, drop_last=True)
    assert [len(b) for b in labels_of(dropped)] == [6, 6, 6]


def test_shuffle_without_seed_follows_manual_seed():
    loader = DataLoader(numbered(20), batch_size=20, shuffle=True)
    lk.manual_seed(5)
    a = labels_of(loader)
    lk.manual_seed(5)
    assert labels_of(loader) == a


class Squares(Dataset):
    def __len__(self):
        return 5

    def __getitem__(self, i):
        return {"x": np.full(2, i, np.float32), "y": i * i, "t": lk.tensor([float(i)])}


def test_generic_dataset_collation_and_collate_fn():
    batches = list(DataLoader(Squares(), batch_size=2))
    assert len(batches) == 3
    assert batches[0]["x"].shape == (2, 2) and batches[0]["y"].tolist() == [0, 1]
    assert batches[2]["t"].shape == (1, 1)
    custom = DataLoader(Squares(), batch_size=5, collate_fn=lambda s: [d["y"] for d in s])
    assert list(custom) == [[0, 1, 4, 9, 16]]
    with pytest.raises(TypeError, match="has no len"):
        len(Dataset())                  # as PyTorch: subclasses say how long they are

    class Ragged(Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            return lk.zeros(i + 1)
    with pytest.raises(lk.ShapeError, match="different shapes"):
        list(DataLoader(Ragged(), batch_size=2))


def test_loader_argument_errors():
    with pytest.raises(ValueError, match="positive integer"):
        DataLoader(numbered(), batch_size=0)
    with pytest.raises(TypeError, match="__len__ and __getitem__"):
        DataLoader(object())


def test_progress_bar(capsys):
    loader = DataLoader(numbered(10), batch_size=5, progress="epoch 1")
    assert len(list(loader)) == 2
    err = capsys.readouterr().err
    assert "epoch 1" in err and "2/2" in err


def test_loader_on_device(device):
    ds = TensorDataset(lk.arange(6, device=device).float(), lk.arange(6, device=device))
    for x, y in DataLoader(ds, batch_size=4, shuffle=True, seed=0):
        assert x.device.name == device and y.device.name == device


def test_digits():
    from sklearn.datasets import load_digits
    train, test = lk.data.digits()
    images, labels = train.tensors
    assert len(train) + len(test) == 1797 and len(test) == 359
    assert images.shape == (1438, 1, 8, 8) and images.dtype is lk.float32
    assert labels.dtype is lk.int64 and set(np.unique(labels.numpy())) == set(range(10))
    assert images.numpy().min() == 0.0 and images.numpy().max() == 1.0
    # the split is a partition of the original set, image and label kept together
    raw = load_digits()
    all_images = np.concatenate([images.numpy(), test.tensors[0].numpy()]).reshape(1797, 64)
    all_labels = np.concatenate([labels.numpy(), test.tensors[1].numpy()])
    order = np.lexsort(all_images.T)
    ref = raw.data.astype(np.float32) / 16
    ref_order = np.lexsort(ref.T)
    np.testing.assert_array_equal(all_images[order], ref[ref_order])
    np.testing.assert_array_equal(np.bincount(all_labels), np.bincount(raw.target))
    again, _ = lk.data.digits()
    np.testing.assert_array_equal(again.tensors[1].numpy(), labels.numpy())   # deterministic
    other, _ = lk.data.digits(seed=1)
    assert not np.array_equal(other.tensors[1].numpy(), labels.numpy())
    small_train, small_test = lk.data.digits(test_fraction=0.5)
    assert len(small_test) == 898
    with pytest.raises(ValueError, match="test_fraction"):
        lk.data.digits(test_fraction=1.0)
