"""Train a small CNN on the handwritten digits, eagerly, and report its test accuracy.

    python examples/train_digits.py [--epochs 8] [--batch-size 32] [--lr 0.003] [--no-progress]

The digits come with scikit-learn (1,797 8x8 images, nothing downloaded). Each epoch shows a
progress bar (a widget in Jupyter) and then the mean training loss and the test accuracy.
"""
import argparse
import os
import sys
import time

try:
    import labkit as lk
except ImportError:                       # run from a checkout without installing labkit
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import labkit as lk

from labkit import nn
from labkit.nn import functional as F


def make_model():
    """Two conv blocks (8x8 -> 4x4 -> 2x2) and a linear classifier: about 6,000 weights."""
    return nn.Sequential(
        nn.Conv2d(1, 16, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 2 * 2, 10))


def accuracy(model, dataset, batch_size=512):
    """Fraction of ``dataset`` that ``model`` classifies correctly (eval mode, no tape)."""
    model.eval()
    correct = 0
    with lk.no_grad():
        for images, labels in lk.data.DataLoader(dataset, batch_size=batch_size):
            correct += int((model(images).argmax(dim=1) == labels).sum().item())
    model.train()
    return correct / len(dataset)


def train(epochs=8, batch_size=32, lr=3e-3, seed=0, progress=True, log=print):
    """Train the CNN; returns {'accuracy', 'seconds', 'model', 'losses'}."""
    lk.manual_seed(seed)
    train_set, test_set = lk.data.digits(test_fraction=0.2, seed=seed)
    model = make_model()
    opt = lk.optim.Adam(model.parameters(), lr=lr)
    log(model)
    log(f"{model.num_parameters()} parameters; {len(train_set)} training and "
        f"{len(test_set)} test images")
    losses = []
    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        loader = lk.data.DataLoader(train_set, batch_size=batch_size, shuffle=True,
                                    seed=seed + epoch,
                                    progress=f"epoch {epoch}/{epochs}" if progress else False)
        total, batches = 0.0, 0
        for images, labels in loader:
            loss = F.cross_entropy(model(images), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
            batches += 1
        losses.append(total / batches)
        log(f"epoch {epoch}: train loss {losses[-1]:.4f}, test accuracy "
            f"{accuracy(model, test_set):.2%}")
    seconds = time.perf_counter() - start
    acc = accuracy(model, test_set)
    return {"accuracy": acc, "seconds": seconds, "model": model, "losses": losses}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    args = parser.parse_args(argv)
    result = train(args.epochs, args.batch_size, args.lr, args.seed,
                   progress=not args.no_progress)
    print(f"final test accuracy: {result['accuracy']:.2%} "
          f"(trained in {result['seconds']:.1f} s, eagerly)")
    return 0 if result["accuracy"] >= 0.95 else 1


if __name__ == "__main__":
    sys.exit(main())
