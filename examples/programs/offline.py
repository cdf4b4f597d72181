"""What the corpus programs took from the network and from torchvision, made here with NumPy.

Every program in this folder downloaded its dataset (MNIST, BSDS300, CIFAR/LSUN, WikiText-2,
tiny Shakespeare...) through torchvision, which is not installed beside the CPU build of PyTorch
used here. Each now calls a function of this module at that place (marked ``# CORPUS:`` in its
source) and wraps the arrays in its own framework's tensors, so the module imports neither
PyTorch nor labkit. Nothing is fetched: the digits are scikit-learn's (installed
with it), the pictures are drawn from a seeded generator, and the text is the public-domain verse
and prose committed in ``examples/data/verse``.

>>> x, y = digits(train=False, size=28)
>>> x.shape, x.dtype, float(x.min()), float(x.max()), y[:5].tolist()
((297, 1, 28, 28), dtype('float32'), 0.0, 1.0, [1, 7, 4, 6, 3])
>>> pictures(2, size=16, channels=3).shape
(2, 3, 16, 16)
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.realpath(__file__))   # also through a link to this file
VERSE = os.path.join(os.path.dirname(HERE), "data", "verse")
TRAIN_DIGITS = 1500          # the first 1500 of scikit-learn's 1797 digits train, the rest test


def digits(train=True, size=28, channels=1, normalize=None, limit=None):
    """scikit-learn's 8x8 handwritten digits resized to ``size`` x ``size`` (bilinear): float32
    images in [0, 1] shaped (N, channels, size, size), as torchvision's ``ToTensor`` gives MNIST,
    and int64 labels. ``channels=3`` tints each grey image with a colour of its own;
    ``normalize=(mean, std)`` (numbers, or one per channel) then gives ``(x - mean) / std``, as
    torchvision's ``Normalize``. The first 1500 digits train, the other 297 test."""
    from scipy.ndimage import zoom
    from sklearn.datasets import load_digits
    raw = load_digits()
    part = slice(0, TRAIN_DIGITS) if train else slice(TRAIN_DIGITS, None)
    images = raw.images[part][:limit].astype(np.float32) / 16.0
    labels = raw.target[part][:limit].astype(np.int64)
    images = zoom(images, (1, size / 8, size / 8), order=1, grid_mode=True, mode="nearest")
    images = np.clip(images, 0.0, 1.0)[:, None]
    if channels > 1:
        images = images * np.random.default_rng(7).uniform(0.5, 1.0, (len(images), channels, 1, 1))
    if normalize is not None:
        mean, std = (np.asarray(v, np.float64).reshape(-1, 1, 1) for v in normalize)
        images = (images - mean) / std
    return np.ascontiguousarray(images, dtype=np.float32), labels


def mnist(train=True, normalize=None):
    """MNIST's stand-in: the digits at 28x28 (see :func:`digits`)."""
    return digits(train=train, size=28, normalize=normalize)


def pictures(n, size=64, channels=3, seed=0):
    """``n`` smooth random pictures in [0, 1], shaped (n, channels, size, size): a colour
    gradient with a few soft discs and one sharp-edged square each (edges for a
    super-resolution net to restore)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    out = np.empty((n, channels, size, size), np.float32)
    for k in range(n):
        img = (rng.uniform(0.2, 0.6, (channels, 1, 1))
               + rng.uniform(-0.2, 0.2, (channels, 1, 1)) * xx
               + rng.uniform(-0.2, 0.2, (channels, 1, 1)) * yy)
        for _ in range(3):
            cy, cx, r = rng.uniform(0.1, 0.9), rng.uniform(0.1, 0.9), rng.uniform(0.05, 0.25)
            disc = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r * r))
            img = img + rng.uniform(-0.4, 0.4, (channels, 1, 1)) * disc
        y0, x0 = rng.integers(0, size // 2, 2)
        side = rng.integers(size // 8, size // 3)
        img[:, y0:y0 + side, x0:x0 + side] += rng.uniform(-0.3, 0.3, (channels, 1, 1))
        out[k] = np.clip(img, 0.0, 1.0)
    return out


def save_image(tensor, fp, nrow=8, padding=2, normalize=False):
    """torchvision's ``utils.save_image`` for the programs that save samples: a grid of the
    images of a (N, C, H, W) tensor of either framework (read through ``numpy.asarray``) as a
    PNG, ``normalize`` stretching its range to [0, 1]."""
    from PIL import Image
    a = np.asarray(tensor, dtype=np.float32)
    if a.ndim == 3:
        a = a[None]
    if normalize:
        a = (a - a.min()) / max(float(a.max() - a.min()), 1e-5)
    n, c, h, w = a.shape
    cols = min(nrow, n)
    rows = -(-n // cols)
    grid = np.zeros((c, rows * (h + padding) + padding, cols * (w + padding) + padding),
                    np.float32)
    for k in range(n):
        y, x = padding + (k // cols) * (h + padding), padding + (k % cols) * (w + padding)
        grid[:, y:y + h, x:x + w] = a[k]
    grid = (np.clip(grid, 0, 1) * 255 + 0.5).astype(np.uint8)
    Image.fromarray(grid[0] if c == 1 else grid.transpose(1, 2, 0)).save(fp)


def write_pictures(folder, n, size, seed=0):
    """``n`` generated RGB pictures of ``size`` x ``size`` as PNG files in ``folder`` (made if
    missing), for the programs that read an image folder."""
    from PIL import Image
    os.makedirs(folder, exist_ok=True)
    for k, img in enumerate(pictures(n, size=size, channels=3, seed=seed)):
        img = (img.transpose(1, 2, 0) * 255 + 0.5).astype(np.uint8)
        Image.fromarray(img).save(os.path.join(folder, f"{k:04d}.png"))
    return folder


# ---- torchvision.transforms' stand-ins for PIL images (ToTensor gives a NumPy array, which
# either framework's DataLoader collates into a tensor) --------------------------------------
class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class CenterCrop:
    def __init__(self, size):
        self.size = size

    def __call__(self, img):
        w, h = img.size
        left, top = (w - self.size) // 2, (h - self.size) // 2
        return img.crop((left, top, left + self.size, top + self.size))


class Resize:
    def __init__(self, size):
        self.size = size

    def __call__(self, img):
        from PIL import Image
        return img.resize((self.size, self.size), Image.BILINEAR)


class ToTensor:
    def __call__(self, img):
        a = np.asarray(img, dtype=np.float32) / 255.0
        return a[None] if a.ndim == 2 else a.transpose(2, 0, 1).copy()


def verse_text(split="train"):
    """The public-domain verse and prose committed for the language-model examples."""
    with open(os.path.join(VERSE, f"{split}.txt"), encoding="utf-8") as f:
        return f.read()
