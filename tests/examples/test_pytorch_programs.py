"""PyTorch's example programs run on labkit with nothing changed but the import.

``examples/pytorch`` holds two ordinary PyTorch programs in the shape of the well-known examples
(an MNIST-style CNN trained with Adadelta and StepLR; a word-level language model with LSTM,
GRU, RNN and Transformer variants). Each test runs a program twice: as written, on PyTorch, and
ported, its source with the import lines alone rewritten (``import torch`` -> ``import labkit as
torch``, ``import torch.nn as nn`` -> ``import labkit.nn as nn`` ...). With PyTorch's initial
weights copied into labkit's model (dropout off), the programs' own ``train``/``test`` functions
give the same losses step for step; run whole from the command line, each framework seeding its
own initialisation, the losses fall alike.
"""
import argparse
import contextlib
import importlib.util
import io
import math
import pathlib
import re
import sys

import numpy as np
import pytest
import torch

import labkit as lk
from benchmarks.corpus.porting import changed_lines, port

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "pytorch"
MNIST = EXAMPLES / "mnist_cnn.py"
WLM = EXAMPLES / "word_language_model"
WLM_DATA = WLM / "data" / "verse"

@contextlib.contextmanager
def _isolated(directory, names):
    """Import from ``directory`` with the program's sibling modules (``data``, ``model``) not
    shared between the PyTorch and labkit copies of a program."""
    saved = {n: sys.modules.pop(n) for n in names if n in sys.modules}
    sys.path.insert(0, str(directory))
    try:
        yield
    finally:
        sys.path.remove(str(directory))
        for n in names:
            sys.modules.pop(n, None)
        sys.modules.update(saved)


def load_program(path, framework, tmp_path, siblings=()):
    """The program at ``path`` as a module (its ``__main__`` block not run): as written for
    ``framework='torch'``, ported (imports only) into ``tmp_path`` for ``'labkit'``; sibling
    modules it imports (``siblings``) come from the same place."""
    directory = path.parent
    if framework == "labkit":
        directory = tmp_path / "ported"
        directory.mkdir(exist_ok=True)
        for name in (path.stem, *siblings):
            source = (path.parent / f"{name}.py").read_text()
            (directory / f"{name}.py").write_text(port(source))
    with _isolated(directory, siblings):
        spec = importlib.util.spec_from_file_location(
            f"{path.stem}_{framework}", directory / path.name)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


def torch_weights(model):
    """A copy of PyTorch's state dict, for labkit's ``load_state_dict`` (strict)."""
    return {k: lk.tensor(v.detach().numpy().copy()) for k, v in model.state_dict().items()}


def assert_params_match(theirs, ours, rtol, atol):
    ours = dict(ours.named_parameters())
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(ours[name].detach().numpy(), p.detach().numpy(), rtol=rtol,
                                   atol=atol, err_msg=name)


def _run_main(module, argv, capsys):
    capsys.readouterr()
    module.main(argv)
    return capsys.readouterr().out


# ---- the port itself -------------------------------------------------------------------------
@pytest.mark.parametrize("path", [MNIST, WLM / "main.py", WLM / "model.py", WLM / "data.py"],
                         ids=lambda p: p.name)
def test_the_port_changes_the_import_lines_only(path):
    source = path.read_text()
    ported = port(source)
    changed = changed_lines(source, ported)
    assert changed, "the program imports torch"
    for before, after in changed:
        assert re.match(r"\s*(import|from) torch", before), before
        assert "labkit" in after and after.replace("labkit", "torch").replace(
            " as torch", "") in (before, before.replace(" as torch", "")), (before, after)
    assert not re.search(r"^\s*(import|from) torch\b", ported, re.M)


# ---- the MNIST-style CNN trainer (Adadelta, StepLR) -----------------------------------------
@pytest.fixture(scope="module")
def mnist(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mnist")
    return (load_program(MNIST, "torch", tmp), load_program(MNIST, "labkit", tmp))


def _loss_lines(out, key):
    return [float(v) for v in re.findall(rf"{key}:? ([0-9.]+)", out)]


def test_mnist_step_for_step_from_pytorchs_weights(mnist, capsys):
    # the program's Net, train() and test(), its Adadelta and StepLR; PyTorch's initial weights,
    # dropout off, the same batches in the same order
    args = argparse.Namespace(log_interval=1, dry_run=False)
    torch.manual_seed(0)
    runs, initial = [], None
    for prog in mnist:
        model = prog.Net()
        for m in (model.dropout1, model.dropout2):
            m.p = 0.0
        if initial is None:
            initial = torch_weights(model)
        else:
            model.load_state_dict(initial)
        device = prog.torch.device("cpu")
        train_loader = prog.torch.utils.data.DataLoader(prog.digits(train=True, limit=160),
                                                        batch_size=32)
        test_loader = prog.torch.utils.data.DataLoader(prog.digits(train=False),
                                                       batch_size=1000)
        optimizer = prog.optim.Adadelta(model.parameters(), lr=1.0)
        scheduler = prog.StepLR(optimizer, step_size=1, gamma=0.7)
        capsys.readouterr()
        test_losses = []
        for epoch in (1, 2, 3):
            prog.train(args, model, device, train_loader, optimizer, epoch)
            test_losses.append(prog.test(model, device, test_loader))
            scheduler.step()
        out = capsys.readouterr().out
        runs.append((model, _loss_lines(out, "Loss"), test_losses,
                     _loss_lines(out, "Accuracy"), optimizer.param_groups[0]["lr"]))
    (tnet, t_train, t_test, _, t_lr), (lnet, l_train, l_test, _, l_lr) = runs
    assert len(t_train) == len(l_train) == 15
    print("mnist train losses (torch, labkit):", list(zip(t_train, l_train)))
    print("mnist test losses (torch, labkit):", list(zip(t_test, l_test)))
    np.testing.assert_allclose(l_train, t_train, rtol=1e-4, atol=2e-6)
    np.testing.assert_allclose(l_test, t_test, rtol=1e-4)
    assert l_lr == pytest.approx(t_lr) == pytest.approx(0.7 ** 3)
    assert t_train[-1] < 0.5 * t_train[0]
    assert_params_match(tnet, lnet, rtol=1e-3, atol=1e-5)


def test_mnist_whole_program_trains_alike(mnist, tmp_path, monkeypatch, capsys):
    # the command line as a user runs it: each framework seeds its own initialisation, dropout
    # on, shuffled batches; the model is saved with torch.save and read back with torch.load
    monkeypatch.chdir(tmp_path)
    argv = ["--epochs", "2", "--train-size", "320", "--batch-size", "32", "--log-interval", "1",
            "--save-model"]
    results = []
    for prog in mnist:
        out = _run_main(prog, argv, capsys)
        train_losses = _loss_lines(out, "Loss")
        test_losses = _loss_lines(out, "Average loss")
        accuracy = [int(a) for a in re.findall(r"Accuracy: (\d+)/", out)]
        state = prog.torch.load("mnist_cnn.pt")
        fresh = prog.Net()
        fresh.load_state_dict(state)
        results.append((train_losses, test_losses, accuracy))
    (t_train, t_test, t_acc), (l_train, l_test, l_acc) = results
    print("mnist whole program, test losses (torch, labkit):", t_test, l_test)
    print("mnist whole program, accuracy of 297 (torch, labkit):", t_acc, l_acc)
    assert len(t_train) == len(l_train) == 20
    assert l_train[0] == pytest.approx(math.log(10), abs=0.15)        # both start at chance
    assert np.mean(l_train[-5:]) < 0.6 * np.mean(l_train[:5])
    assert l_test[-1] < l_test[0] and l_test[-1] < 1.5 * t_test[-1] + 0.1
    assert l_acc[-1] > 0.8 * t_acc[-1]


# ---- the word-level language model (LSTM / GRU / RNN / Transformer) --------------------------
@pytest.fixture(scope="module")
def wlm(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wlm")
    return (load_program(WLM / "main.py", "torch", tmp, siblings=("data", "model")),
            load_program(WLM / "main.py", "labkit", tmp, siblings=("data", "model")))


class RecordingLoss:
    """The program's criterion (``nn.NLLLoss()``), noting every loss it returns."""

    def __init__(self, nn):
        self.criterion = nn.NLLLoss()
        self.losses = []

    def __call__(self, output, target):
        loss = self.criterion(output, target)
        self.losses.append(loss.item())
        return loss


TINY = dict(emsize=32, nhid=32, nlayers=2, bptt=10, batch_size=8, clip=0.25, nhead=2,
            log_interval=1000, dry_run=False)


# (a GRU at the default rate of 20 is chaotic here: float64 runs agree to 1e-11 after two epochs,
# float32 ones part at 1e-4 as rounding is amplified, so it takes a rate of 5)
@pytest.mark.parametrize("kind,tied,lr", [("LSTM", True, 20.0), ("GRU", False, 5.0),
                                          ("Transformer", False, 5.0)])
def test_wlm_step_for_step_from_pytorchs_weights(wlm, kind, tied, lr, capsys):
    # the program's Corpus, batchify, models, train() (repackage_hidden, clip_grad_norm_, the
    # manual SGD update) and evaluate(); PyTorch's initial weights, dropout 0; two epochs with
    # the learning rate annealed between them as main() does
    args = argparse.Namespace(model=kind, tied=tied, **TINY)
    torch.manual_seed(0)
    runs, initial = [], None
    for prog in wlm:
        corpus = prog.data.Corpus(str(WLM_DATA))
        device = prog.torch.device("cpu")
        train_data = prog.batchify(corpus.train, args.batch_size, device)
        val_data = prog.batchify(corpus.valid, 10, device)
        ntokens = len(corpus.dictionary)
        if kind == "Transformer":
            model = prog.model.TransformerModel(ntokens, args.emsize, args.nhead, args.nhid,
                                                args.nlayers, 0.0)
        else:
            model = prog.model.RNNModel(kind, ntokens, args.emsize, args.nhid, args.nlayers,
                                        0.0, tied)
        if initial is None:
            initial = torch_weights(model)
        else:
            model.load_state_dict(initial)
        train_loss, val_loss = RecordingLoss(prog.nn), RecordingLoss(prog.nn)
        vals = []
        for epoch, rate in ((1, lr), (2, lr / 4.0)):
            prog.train(model, train_data, train_loss, ntokens, rate, epoch, args)
            vals.append(prog.evaluate(model, val_data, val_loss, ntokens, args))
        runs.append((model, train_loss.losses, vals))
    (tm, t_train, t_val), (lm_, l_train, l_val) = runs
    print(f"wlm {kind} train losses (torch, labkit):", list(zip(t_train, l_train)))
    print(f"wlm {kind} valid losses (torch, labkit):", list(zip(t_val, l_val)))
    assert len(t_train) == len(l_train) > 20
    np.testing.assert_allclose(l_train, t_train, rtol=1e-4)
    np.testing.assert_allclose(l_val, t_val, rtol=1e-4)
    assert np.mean(t_train[-5:]) < np.mean(t_train[:5]) - 0.5
    assert_params_match(tm, lm_, rtol=1e-3, atol=1e-4)
    if tied:
        assert lm_.decoder.weight is lm_.encoder.weight


@pytest.mark.parametrize("kind", ["LSTM", "Transformer"])
def test_wlm_whole_program_trains_alike(wlm, kind, tmp_path, monkeypatch, capsys):
    # main() from the command line: dropout on, each framework its own seeded initialisation,
    # lr annealing, the best model saved with torch.save and reloaded with torch.load
    monkeypatch.chdir(tmp_path)
    argv = ["--data", str(WLM_DATA), "--model", kind, "--epochs", "3", "--emsize", "32",
            "--nhid", "32", "--bptt", "10", "--batch_size", "8", "--log-interval", "4",
            "--lr", "5" if kind == "Transformer" else "20", "--dropout", "0.1", "--save", "lm.pt"]
    if kind == "LSTM":
        argv.append("--tied")
    results = []
    for prog in wlm:
        out = _run_main(prog, argv, capsys)
        train = [float(v) for v in re.findall(r"\| loss +([0-9.]+)", out)]
        valid = [float(v) for v in re.findall(r"valid loss +([0-9.]+)", out)]
        test = float(re.search(r"test loss +([0-9.]+)", out).group(1))
        results.append((train, valid, test))
    (t_train, t_valid, t_test), (l_train, l_valid, l_test) = results
    print(f"wlm {kind} whole program (torch, labkit): train {t_train} {l_train}, "
          f"valid {t_valid} {l_valid}, test {t_test} {l_test}")
    assert len(l_train) == len(t_train) == 9 and len(l_valid) == len(t_valid) == 3
    uniform = math.log(442)                          # the corpus's vocabulary, <eos> included
    assert l_train[0] == pytest.approx(t_train[0], abs=0.3)
    assert l_train[-1] < l_train[0] - 0.5
    assert min(l_valid) < uniform and l_test < uniform
    assert abs(l_test - t_test) < 0.25
