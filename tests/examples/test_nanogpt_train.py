"""nanoGPT's ``train.py`` as written, on labkit, against PyTorch's run of it on the CPU: with
``--compile=True``, with ``--dtype=bfloat16``, and as two DDP ranks under
``python -m labkit.dist.run --standalone --nproc_per_node=2``.

train.py's DDP branch puts rank r on ``cuda:r`` (``torch.cuda.set_device``), and its autocast is
entered only on a CUDA device; PyTorch's CPU build cannot run either (``torchrun`` with gloo
stops at ``torch.cuda.set_device``), so labkit runs them on two simulated GPUs
(``on_simulated_gpus.py``: ``tests/devices/fake_gpu.py``, NumPy behind ``cuda:0`` and
``cuda:1``), and they are compared with PyTorch's single CPU process with the same global
batch.

Both libraries run the same command line from the same start, so their printed losses can be
compared line for line: they resume (``--init_from=resume``) from one checkpoint, the weights
PyTorch initialised (saved by each library in its own format), and the dataset holds one
window more than ``block_size`` tokens, so ``get_batch``'s ``torch.randint(len(data) -
block_size, ...)`` can only draw 0: every batch is the same on both, whatever their random
generators. The learning rate changes every iteration (warm-up, then cosine decay), so the
compiled step must read it anew each time.
"""
import contextlib
import importlib
import io
import os
import pickle
import re
import runpy
import subprocess
import sys

import numpy as np
import pytest

from benchmarks.corpus import porting

torch = pytest.importorskip("torch")
import labkit as lk  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VOCAB, BLOCK, ITERS = 20, 16, 8
MODEL_ARGS = dict(n_layer=2, n_head=2, n_embd=32, block_size=BLOCK, bias=False,
                  vocab_size=VOCAB, dropout=0.0)
# the global batch: 2 micro-steps of 2 sequences; under DDP, one micro-step on each of 2 ranks
ARGV = ["--dataset=fixed", "--device=cpu", "--init_from=resume", "--out_dir=out",
        "--batch_size=2", f"--block_size={BLOCK}", "--gradient_accumulation_steps=2",
        "--dropout=0.0", "--learning_rate=0.01", "--warmup_iters=2", f"--lr_decay_iters={ITERS}",
        "--min_lr=0.001", f"--max_iters={ITERS}", "--eval_interval=1000", "--eval_iters=1",
        "--log_interval=1", "--always_save_checkpoint=False", "--backend=gloo"]
LOSS = re.compile(r"^(?:\[rank 0\] )?iter (\d+): loss ([0-9.]+)", re.M)


def _prepare(workdir, framework, start):
    """The program's copy for ``framework``: its fixed dataset, and the checkpoint it resumes
    from, holding the weights ``start`` (NumPy arrays) and a fresh optimiser state."""
    folder = porting.materialize("nanogpt", framework, workdir)
    data = folder / "data" / "fixed"
    data.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    for split in ("train", "val"):
        rng.integers(0, VOCAB, BLOCK + 1).astype(np.uint16).tofile(data / f"{split}.bin")
    with open(data / "meta.pkl", "wb") as f:
        pickle.dump({"vocab_size": VOCAB}, f)
    lib = torch if framework == "torch" else lk
    with porting.program_context(folder, ["model.py"]):
        model_py = importlib.import_module("model")
        model = model_py.GPT(model_py.GPTConfig(**MODEL_ARGS))
    state = model.state_dict()
    if start is not None:
        model.load_state_dict({k: lib.from_numpy(start[k].copy()) for k in state})
    optimizer = model.configure_optimizers(0.1, 0.01, (0.9, 0.95), "cpu")
    (folder / "out").mkdir(exist_ok=True)
    lib.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
              "model_args": MODEL_ARGS, "iter_num": 0, "best_val_loss": 1e9},
             str(folder / "out" / "ckpt.pt"))
    return folder, {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def _losses(out):
    found = [(int(i), float(v)) for i, v in LOSS.findall(out)]
    assert [i for i, _ in found] == list(range(ITERS + 1)), out[-2000:]
    return np.array([v for _, v in found])


@pytest.fixture(scope="module")
def pytorch(tmp_path_factory):
    """PyTorch's run of train.py on the CPU (eager, float32): its printed losses, and the
    weights it started from."""
    workdir = tmp_path_factory.mktemp("nanogpt")
    torch.manual_seed(0)
    _, start = _prepare(workdir, "torch", None)
    out = porting.run("nanogpt", "torch", workdir, "train.py", ARGV + ["--compile=False",
                                                                      "--dtype=float32"])
    losses = _losses(out)
    assert losses[-1] < losses[0] - 0.5             # it learns the one sequence it sees
    return workdir, start, losses


def _labkit_run(pytorch, *argv):
    """labkit's train.py in this process: what it printed, and its globals."""
    workdir, start, _ = pytorch
    folder, _ = _prepare(workdir, "labkit", start)
    out = io.StringIO()
    with porting.program_context(folder, [str(folder / "train.py"), *ARGV, *argv]), \
            contextlib.redirect_stdout(out):
        names = runpy.run_path(str(folder / "train.py"), run_name="__main__")
    return out.getvalue(), names


def test_compiled_train_py_tracks_pytorch(pytorch):
    """``--compile=True``: ``torch.compile(model)`` is ``lk.compile``, which captures the whole
    GPT (one graph for training, one for estimate_loss's no_grad, no graph break); the losses
    are PyTorch's to the 4 printed decimals (float32 sums in another order: 2e-4). (PyTorch's
    own compiled run prints the same losses, but takes 40 s to compile on 2 cores.)"""
    out, names = _labkit_run(pytorch, "--compile=True", "--dtype=float32")
    compiled = names["model"].forward
    assert "compiling the model" in out and len(compiled.traces) == 2 and not compiled.breaks
    np.testing.assert_allclose(_losses(out), pytorch[2], rtol=0, atol=2e-4)


def test_bfloat16_train_py_tracks_pytorch(pytorch):
    """``--dtype=bfloat16`` on the CPU: train.py builds ``torch.amp.autocast`` only for a CUDA
    device (``ctx = nullcontext() if device_type == 'cpu'``) and enables its GradScaler only for
    float16, so on the CPU, in PyTorch as in labkit, the step computes in float32 and the losses
    agree as closely as float32's (2e-4 at 4 printed decimals). bf16 autocast itself is compared
    with PyTorch's CPU autocast in tests/amp."""
    out, _ = _labkit_run(pytorch, "--compile=False", "--dtype=bfloat16")
    np.testing.assert_allclose(_losses(out), pytorch[2], rtol=0, atol=2e-4)


def _on_simulated_gpus(pytorch, argv, ranks=0):
    """labkit's train.py on two simulated GPUs, in a process of its own (``ranks`` DDP ranks
    under ``python -m labkit.dist.run``, or one process); what rank 0 printed."""
    workdir, start, _ = pytorch
    folder, _ = _prepare(workdir, "labkit", start)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        env.pop(name, None)
    launch = [sys.executable, "-m", "labkit.dist.run", "--standalone",
              f"--nproc_per_node={ranks}"] if ranks else [sys.executable]
    done = subprocess.run(
        launch + [os.path.join(ROOT, "tests", "examples", "on_simulated_gpus.py"),
                  str(folder / "train.py")] + argv,
        capture_output=True, text=True, env=env, cwd=folder, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_ddp_train_py_on_two_ranks_tracks_pytorch(pytorch, compiled):
    """Two ranks, one micro-step each (train.py divides gradient_accumulation_steps=2 by the
    world size), against PyTorch's one process doing both micro-steps: DDP's averaged gradient
    is the accumulated one, so the losses agree as float32's do; also with DDP around the
    compiled model. Only rank 0 prints."""
    out = _on_simulated_gpus(pytorch, ARGV + [f"--compile={compiled}", "--dtype=float32"],
                             ranks=2)
    assert "[rank 1] iter" not in out and "[rank 1] tokens per iteration will be: 64" in out
    np.testing.assert_allclose(_losses(out), pytorch[2], rtol=0, atol=2e-4)


def test_bfloat16_autocast_train_py_on_a_gpu_tracks_pytorch(pytorch):
    """``--device=cuda --dtype=bfloat16``: train.py runs its forward passes under
    ``torch.amp.autocast('cuda', dtype=torch.bfloat16)``: matmuls and attention take bfloat16
    inputs (8 significant bits: each rounded by up to 2**-9 relative), softmax, norms and the
    loss stay in float32. Against PyTorch's float32 run the losses may differ by some 1e-3
    relative after 8 steps (seen: 4e-4), so rtol 1e-2; and they must differ somewhere, or
    autocast did not run."""
    argv = [a for a in ARGV if not a.startswith("--device")] + [
        "--device=cuda", "--compile=False", "--dtype=bfloat16"]
    losses = _losses(_on_simulated_gpus(pytorch, argv))
    np.testing.assert_allclose(losses, pytorch[2], rtol=1e-2)
    assert np.abs(losses - pytorch[2]).max() > 5e-5
