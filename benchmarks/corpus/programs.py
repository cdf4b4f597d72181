"""The corpus programs as the tests and the benchmark drive them: one training step each.

Each :class:`Program` names a folder of ``examples/programs``, how to load it (its module, the
command line it is set up with, and, for a script whose training loop is top-level code, the
statement where its setup ends), the objects its training loop uses (built by the program's own
code, or as its ``main()`` builds them), its batches (drawn with NumPy, so that both frameworks
get the same ones), and its **step**: the body of the program's training loop, calling the
program's own model, loss and optimiser, without its logging (``loss.item()``, prints) and with
its random draws (DCGAN's noise) taken from the batch.

``Program.setup(framework, workdir, deterministic=...)`` loads the program for "torch" or
"labkit" and returns a :class:`Setup`; ``deterministic=True`` switches dropout off and gives
random draws inside a model (the VAE's ``randn_like``) from the batch, so that two frameworks
started from the same weights (``Setup.state()`` / ``Setup.load_state()``) give the same losses.
"""
import contextlib
import math

import numpy as np

from . import porting

VERSE = porting.CORPUS.parent / "data" / "verse"


class Setup:
    """A loaded program, ready to step: ``prog`` (its module), ``lib`` (``torch`` or
    ``labkit``), ``modules`` (name -> the nn.Modules whose weights define the run), and what
    its step needs (``objs``)."""

    def __init__(self, program, prog, lib, modules, deterministic, **objs):
        self.program, self.prog, self.lib = program, prog, lib
        self.modules, self.deterministic, self.objs = modules, deterministic, objs
        self.carry = None                       # state carried from step to step (RNN hidden)

    def state(self):
        """Every module's state dict as NumPy arrays: {module name: {key: array}}."""
        return {name: {k: np.array(v.detach().cpu().numpy() if hasattr(v, "detach") else v)
                       for k, v in m.state_dict().items()}
                for name, m in self.modules.items()}

    def load_state(self, state):
        for name, m in self.modules.items():
            m.load_state_dict({k: self.tensor(v) for k, v in state[name].items()})

    def tensor(self, array):
        array = np.asarray(array)
        return self.lib.from_numpy(array if array.flags.c_contiguous else array.copy())

    def batch(self, arrays):
        return {k: self.tensor(v) for k, v in arrays.items()}

    def step(self, batch):
        """One training step on ``batch`` (framework tensors): the loss, or a tuple of losses."""
        return self.program.step(self, batch)

    @contextlib.contextmanager
    def randomness(self, batch):
        """Random draws inside the model come from ``batch`` when deterministic."""
        with self.program.randomness(self, batch) if self.deterministic else \
                contextlib.nullcontext():
            yield


class Program:
    """One corpus program (see the module's docstring). Subclasses set the class attributes
    and write ``build``, ``batches`` and ``step``."""

    name = ""                 # folder in examples/programs
    title = ""                # one line for tables
    entry = "main.py"
    argv = ()                 # the command line it is set up with
    stop_at = None            # first top-level statement of its training loop, for scripts
    check_steps = 3           # steps compared between frameworks
    rtol = 1e-4               # how closely the losses agree over check_steps
    tensor_carry = False      # the step carries tensors to the next one in ``Setup.carry``
    runs = ()                 # a short whole run: (file, command line) pairs, run in order
    note = ""                 # why rtol (or check_dtype), when it is not 1e-4 (float32)
    check_dtype = None        # "float64": the check runs the model and batches in float64

    def load(self, framework, workdir):
        return porting.load(self.name, framework, workdir, entry=self.entry,
                            argv=list(self.argv), stop_at=self.stop_at)

    def setup(self, framework, workdir, deterministic=False):
        prog = self.load(framework, workdir)
        lib = prog.torch
        lib.manual_seed(0)
        return self.build(prog, lib, deterministic)

    def build(self, prog, lib, deterministic):
        raise NotImplementedError

    def batches(self, rng, n):
        """``n`` batches, each a dict of NumPy arrays."""
        raise NotImplementedError

    def check_batches(self, rng):
        """The batches of the agreement check (``check_steps`` of them)."""
        return self.batches(rng, self.check_steps)

    def before_step(self, s):
        """What the loop does in Python before each step (a learning-rate schedule): run
        outside a captured step."""

    def step(self, s, batch):
        raise NotImplementedError

    def captured(self, s):
        """The step as ``lk.function`` runs it: a function of the batch (and of ``s.carry``
        when the step carries tensors from one step to the next), its Python bookkeeping
        (``before_step``) outside the captured function."""
        lk = s.lib
        if self.tensor_carry:
            @lk.function
            def step(batch, carry):
                s.carry = carry
                loss = self.step(s, batch)
                return loss, s.carry

            def run(batch):
                self.before_step(s)
                # the step sets s.carry before it reads it: None at each call, so the trace's
                # guard on s.carry holds (the carried tensors come in as an argument)
                carry, s.carry = s.carry, None
                loss, s.carry = step(batch, carry)
                return loss
            return run
        step = lk.function(lambda batch: self.step(s, batch))

        def run(batch):
            self.before_step(s)
            return step(batch)
        return run

    def eager(self, s):
        """The step as the program runs it."""
        def run(batch):
            self.before_step(s)
            return self.step(s, batch)
        return run

    @contextlib.contextmanager
    def randomness(self, s, batch):
        yield


def _no_dropout(lib, *models):
    for model in models:
        for m in model.modules():
            if isinstance(m, (lib.nn.Dropout, lib.nn.Dropout2d)):
                m.p = 0.0
            elif isinstance(m, (lib.nn.RNNBase, lib.nn.MultiheadAttention)):
                m.dropout = 0.0                 # between stacked layers; on attention weights


def _digits_batch(rng, n, size=28, channels=1, classes=10, normalize=(0.1307, 0.3081)):
    """Random images shaped like the program's normalised data, and labels."""
    x = rng.random((n, channels, size, size), dtype=np.float32)
    mean, std = normalize
    return {"x": ((x - mean) / std).astype(np.float32),
            "y": rng.integers(0, classes, n).astype(np.int64)}


# ---- pytorch/examples mnist: CNN, dropout, Adadelta ----------------------------------------
class Mnist(Program):
    name = "mnist"
    runs = (("main.py", ("--epochs", "1", "--dry-run")),)
    title = "MNIST CNN (pytorch/examples mnist): 2 conv, max-pool, dropout, 2 linear, Adadelta"
    batch_size = 64

    def build(self, prog, lib, deterministic):
        model = prog.Net()
        if deterministic:
            _no_dropout(lib, model)
        optimizer = prog.optim.Adadelta(model.parameters(), lr=1.0)
        return Setup(self, prog, lib, {"model": model}, deterministic, model=model,
                     optimizer=optimizer)

    def batches(self, rng, n):
        return [_digits_batch(rng, self.batch_size) for _ in range(n)]

    def step(self, s, batch):
        model, optimizer, F = s.objs["model"], s.objs["optimizer"], s.prog.F
        optimizer.zero_grad()
        output = model(batch["x"])
        loss = F.nll_loss(output, batch["y"])
        loss.backward()
        optimizer.step()
        return loss


# ---- pytorch/examples mnist_rnn: LSTM over 28 rows, BatchNorm1d, Adadelta -------------------
class MnistRnn(Mnist):
    name = "mnist_rnn"
    runs = (("main.py", ("--epochs", "1", "--dry-run")),)
    title = ("MNIST LSTM (pytorch/examples mnist_rnn): LSTM(28, 64) over 28 rows, BatchNorm1d, "
             "dropout, 2 linear, Adadelta")

    def build(self, prog, lib, deterministic):
        s = super().build(prog, lib, deterministic)
        for group in s.objs["optimizer"].param_groups:
            group["lr"] = 0.1                    # mnist_rnn's default --lr
        return s


# ---- pytorch/examples dcgan: ConvTranspose2d generator, conv discriminator, BCE, Adam -------
class Dcgan(Program):
    name = "dcgan"
    runs = (("main.py", ("--dataset", "fake", "--dry-run", "--ngf", "8", "--ndf", "8", "--batchSize", "8",
                         "--workers", "0", "--manualSeed", "1", "--outf", "out")),)
    title = ("DCGAN (pytorch/examples dcgan) 64x64, ngf=ndf=32, batch 16: D and G steps, "
             "ConvTranspose2d + BatchNorm2d, BCE, Adam")
    argv = ("--dataset", "fake", "--ngf", "32", "--ndf", "32", "--batchSize", "16",
            "--workers", "0", "--manualSeed", "1", "--outf", "out")
    stop_at = "for epoch in range(opt.niter)"
    batch_size, nz, size = 16, 100, 64
    check_steps = 2
    check_dtype = "float64"
    rtol = 1e-9
    note = ("chaotic in float32: PyTorch's own float32 and float64 runs of the same steps part "
            "at 4e-5 by the second step's discriminator loss (BatchNorm over 16 images and a "
            "discriminator near saturation amplify each step's rounding), and two float32 "
            "implementations whose sums round differently part at up to 6e-4; in float64 "
            "labkit and PyTorch agree to 1e-15")

    def build(self, prog, lib, deterministic):
        return Setup(self, prog, lib, {"netG": prog.netG, "netD": prog.netD}, deterministic,
                     netG=prog.netG, netD=prog.netD, criterion=prog.criterion,
                     optimizerD=prog.optimizerD, optimizerG=prog.optimizerG)

    def batches(self, rng, n):
        return [{"real": (rng.random((self.batch_size, 3, self.size, self.size),
                                     dtype=np.float32) * 2 - 1),
                 "noise": rng.standard_normal((self.batch_size, self.nz, 1, 1),
                                              dtype=np.float32)}
                for _ in range(n)]

    def step(self, s, batch):
        # main.py's loop body; the noise comes from the batch instead of torch.randn
        torch, o = s.lib, s.objs
        netD, netG, criterion = o["netD"], o["netG"], o["criterion"]
        real_label, fake_label = 1, 0
        netD.zero_grad()
        real_cpu = batch["real"]
        batch_size = real_cpu.size(0)
        label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype)
        output = netD(real_cpu)
        errD_real = criterion(output, label)
        errD_real.backward()
        noise = batch["noise"]
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        errD = errD_real + errD_fake
        o["optimizerD"].step()
        netG.zero_grad()
        label.fill_(real_label)
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        o["optimizerG"].step()
        return errD, errG


# ---- pytorch/examples vae: MLP VAE, reparameterisation, BCE + KL, Adam ---------------------
class Vae(Program):
    name = "vae"
    runs = (("main.py", ("--epochs", "1", "--log-interval", "4")),)
    title = "VAE (pytorch/examples vae): 784-400-20 MLP encoder/decoder, BCE + KL, Adam, batch 128"
    batch_size = 128

    def build(self, prog, lib, deterministic):
        model = prog.VAE()
        optimizer = prog.optim.Adam(model.parameters(), lr=1e-3)
        return Setup(self, prog, lib, {"model": model}, deterministic, model=model,
                     optimizer=optimizer)

    def batches(self, rng, n):
        return [{"x": rng.random((self.batch_size, 1, 28, 28), dtype=np.float32),
                 "eps": rng.standard_normal((self.batch_size, 20), dtype=np.float32)}
                for _ in range(n)]

    @contextlib.contextmanager
    def randomness(self, s, batch):
        # reparameterize()'s torch.randn_like(std) gives the batch's eps
        lib, saved = s.lib, s.lib.randn_like
        lib.randn_like = lambda t, **kw: batch["eps"]
        try:
            yield
        finally:
            lib.randn_like = saved

    def step(self, s, batch):
        model, optimizer = s.objs["model"], s.objs["optimizer"]
        data = batch["x"]
        with s.randomness(batch):
            optimizer.zero_grad()
            recon_batch, mu, logvar = model(data)
            loss = s.prog.loss_function(recon_batch, data, mu, logvar)
            loss.backward()
            optimizer.step()
        return loss


# ---- pytorch/examples super_resolution: conv net + pixel shuffle, MSE, Adam -----------------
class SuperResolution(Program):
    name = "super_resolution"
    runs = (("main.py", ("--upscale_factor", "3", "--batchSize", "4", "--nEpochs", "1",
                         "--threads", "0")),)
    title = ("super-resolution (pytorch/examples super_resolution) x3: 4 conv + pixel shuffle, "
             "85x85 -> 255x255, batch 4, MSE, Adam")
    argv = ("--upscale_factor", "3", "--batchSize", "4", "--threads", "0", "--nEpochs", "1")
    stop_at = "for epoch in range(1, opt.nEpochs + 1)"
    batch_size, factor, size = 4, 3, 255
    check_steps = 2
    rtol = 1e-3
    note = ("Adam at the program's rate of 0.01 overshoots at its second step (the loss "
            "jumps about 60-fold), which amplifies float32 rounding: 1e-3 over two steps")

    def build(self, prog, lib, deterministic):
        return Setup(self, prog, lib, {"model": prog.model}, deterministic, model=prog.model,
                     criterion=prog.criterion, optimizer=prog.optimizer)

    def batches(self, rng, n):
        out = []
        for _ in range(n):
            target = rng.random((self.batch_size, 1, self.size, self.size), dtype=np.float32)
            small = target.reshape(self.batch_size, 1, self.size // self.factor, self.factor,
                                   self.size // self.factor, self.factor).mean(axis=(3, 5))
            out.append({"input": small.astype(np.float32), "target": target})
        return out

    def step(self, s, batch):
        model, criterion, optimizer = s.objs["model"], s.objs["criterion"], s.objs["optimizer"]
        optimizer.zero_grad()
        loss = criterion(model(batch["input"]), batch["target"])
        loss.backward()
        optimizer.step()
        return loss


# ---- pytorch/examples time_sequence_prediction: two LSTMCells, float64, LBFGS ---------------
class TimeSequence(Program):
    name = "time_sequence_prediction"
    runs = (("generate_sine_wave.py", ()), ("train.py", ("--steps", "1")))
    title = ("sine-wave LSTM (pytorch/examples time_sequence_prediction): 2 LSTMCell(51) over "
             "199 steps, float64, 97 sequences, one LBFGS step (up to 20 evaluations)")
    entry = "train.py"
    check_steps = 2

    def build(self, prog, lib, deterministic):
        seq = prog.Sequence()
        seq.double()
        criterion = prog.nn.MSELoss()
        optimizer = prog.optim.LBFGS(seq.parameters(), lr=0.8)
        return Setup(self, prog, lib, {"seq": seq}, deterministic, seq=seq,
                     criterion=criterion, optimizer=optimizer)

    def batches(self, rng, n, length=200):
        # generate_sine_wave.py's data (its seed and sizes), the same for every step
        r = np.random.RandomState(2)
        x = np.empty((100, 200), "int64")
        x[:] = np.array(range(200)) + r.randint(-80, 80, 100).reshape(100, 1)
        data = np.sin(x / 1.0 / 20).astype("float64")[:, :length]
        return [{"input": data[3:, :-1], "target": data[3:, 1:]} for _ in range(n)]

    def check_batches(self, rng):
        # the first 20 samples of each wave: 20 LBFGS evaluations of 199 steps take a while
        return self.batches(rng, self.check_steps, length=20)

    def closure(self, s, batch):
        # train.py's closure (without its print of the loss)
        seq, criterion, optimizer = s.objs["seq"], s.objs["criterion"], s.objs["optimizer"]
        optimizer.zero_grad()
        out = seq(batch["input"])
        loss = criterion(out, batch["target"])
        loss.backward()
        return loss

    def step(self, s, batch):
        return s.objs["optimizer"].step(lambda: self.closure(s, batch))

    def captured(self, s):
        # LBFGS decides in Python, from the losses, how often to evaluate: its closure is
        # captured, and the optimiser runs eagerly around it
        closure = s.lib.function(lambda batch: self.closure(s, batch))
        return lambda batch: s.objs["optimizer"].step(lambda: closure(batch))


# ---- pytorch/examples regression: a polynomial fitted by one Linear layer -------------------
class Regression(Program):
    name = "regression"
    runs = (("main.py", ()),)
    title = "polynomial regression (pytorch/examples regression): Linear(4, 1), smooth L1, SGD by hand, batch 32"
    stop_at = "for batch_idx in count(1)"
    w_target = np.array([[1.5], [-2.0], [0.7], [3.1]], np.float32)
    b_target = np.float32(0.4)

    def build(self, prog, lib, deterministic):
        fc = prog.torch.nn.Linear(4, 1)
        return Setup(self, prog, lib, {"fc": fc}, deterministic, fc=fc)

    def batches(self, rng, n):
        out = []
        for _ in range(n):
            r = rng.standard_normal(32).astype(np.float32)
            x = np.stack([r ** i for i in range(1, 5)], 1)
            out.append({"x": x, "y": x @ self.w_target + self.b_target})
        return out

    def step(self, s, batch):
        fc, F = s.objs["fc"], s.prog.F
        fc.zero_grad()
        output = F.smooth_l1_loss(fc(batch["x"]), batch["y"])
        output.backward()
        for param in fc.parameters():
            param.data.add_(-0.1 * param.grad)
        return output


# ---- pytorch/examples word_language_model: 2-layer LSTM LM, BPTT, clipping, SGD by hand -----
class WordLanguageModel(Program):
    """``--model`` LSTM by default (the program's own default); ``WordLanguageModel("GRU")``,
    ``("RNN_TANH")``, ``("Transformer")``, ``tied=True`` set up the program with its other
    models, for the agreement check (``VARIANTS``)."""
    name = "word_language_model"
    runs = (("main.py", ("--data", str(VERSE), "--epochs", "1", "--emsize", "32", "--nhid", "32",
                         "--bptt", "10", "--batch_size", "8", "--log-interval", "4",
                         "--save", "model.pt")),)
    title = ("word language model (pytorch/examples word_language_model): embedding 200, "
             "2-layer LSTM 200, bptt 35, batch 20, clipping, SGD by hand")

    def __init__(self, model="LSTM", tied=False):
        self.model, self.tied = model, tied
        self.argv = ("--data", str(VERSE), "--epochs", "0", "--save", "model.pt",
                     "--model", model) + (("--tied",) if tied else ())
        self.stop_at = "lr = args.lr"
        self.tensor_carry = model != "Transformer"      # the recurrent models carry hidden

    @property
    def label(self):
        """``word_language_model`` for the default, ``word_language_model[GRU]``,
        ``word_language_model[LSTM,tied]`` for the others."""
        if (self.model, self.tied) == ("LSTM", False):
            return self.name
        return f"{self.name}[{self.model}{',tied' if self.tied else ''}]"

    def build(self, prog, lib, deterministic):
        args, model = prog.args, prog.model
        if deterministic:
            _no_dropout(lib, model)
        s = Setup(self, prog, lib, {"model": model}, deterministic, model=model,
                  criterion=prog.criterion, lr=args.lr, clip=args.clip)
        if self.tensor_carry:
            s.carry = model.init_hidden(args.batch_size)
        return s

    def batches(self, rng, n):
        # bptt x batch windows of the program's own batchified training text, in its order
        ids = verse_word_ids()
        bsz, bptt = 20, 35
        cols = ids[:len(ids) // bsz * bsz].reshape(bsz, -1).T
        out, i = [], 0
        for _ in range(n):
            if i + bptt + 1 > len(cols):
                i = 0
            out.append({"data": np.ascontiguousarray(cols[i:i + bptt]),
                        "targets": np.ascontiguousarray(cols[i + 1:i + 1 + bptt]).reshape(-1)})
            i += bptt
        return out

    def step(self, s, batch):
        # train()'s loop body
        prog, model, lr = s.prog, s.objs["model"], s.objs["lr"]
        model.zero_grad()
        if prog.args.model == 'Transformer':
            output = model(batch["data"])
            output = output.view(-1, prog.ntokens)
        else:
            hidden = prog.repackage_hidden(s.carry)
            output, hidden = model(batch["data"], hidden)
            s.carry = hidden
        loss = s.objs["criterion"](output, batch["targets"])
        loss.backward()
        s.lib.nn.utils.clip_grad_norm_(model.parameters(), s.objs["clip"])
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        return loss


# ---- karpathy/nanoGPT: model.py + train.py's loop ------------------------------------------
class NanoGpt(Program):
    name = "nanogpt"
    runs = (("data/verse_char/prepare.py", ()),
            ("train.py", ("--dataset=verse_char", "--device=cpu", "--compile=False",
                          "--dtype=float32", "--n_layer=2", "--n_head=2", "--n_embd=32",
                          "--block_size=32", "--batch_size=4",
                          "--gradient_accumulation_steps=1", "--max_iters=3",
                          "--eval_interval=1000", "--eval_iters=2",
                          "--always_save_checkpoint=False")))
    title = ("nanoGPT (karpathy/nanoGPT model.py + train.py loop): 4 layers, 4 heads, d 128, "
             "context 64, batch 12, char-level, AdamW, cosine lr, clipping")
    entry = "train.py"
    argv = ("--dataset=verse_char", "--device=cpu", "--compile=False", "--dtype=float32",
            "--n_layer=4", "--n_head=4", "--n_embd=128", "--block_size=64", "--batch_size=12",
            "--gradient_accumulation_steps=1", "--dropout=0.0", "--learning_rate=1e-3",
            "--warmup_iters=5", "--lr_decay_iters=100", "--min_lr=1e-4")
    stop_at = "X, Y = get_batch('train')"
    block_size, batch_size = 64, 12

    def load(self, framework, workdir):
        folder = porting.materialize(self.name, framework, workdir)
        if not (folder / "data" / "verse_char" / "train.bin").exists():
            porting.run(self.name, framework, workdir, "data/verse_char/prepare.py")
        return super().load(framework, workdir)

    def build(self, prog, lib, deterministic):
        s = Setup(self, prog, lib, {"model": prog.model}, deterministic, model=prog.model,
                  optimizer=prog.optimizer, scaler=prog.scaler)
        s.iter_num = 0
        return s

    def before_step(self, s):
        # determine and set the learning rate for this iteration
        prog = s.prog
        lr = prog.get_lr(s.iter_num) if prog.decay_lr else prog.learning_rate
        for param_group in s.objs["optimizer"].param_groups:
            param_group['lr'] = lr
        s.iter_num += 1

    def batches(self, rng, n):
        data = verse_char_ids()
        out = []
        for _ in range(n):
            ix = rng.integers(len(data) - self.block_size, size=self.batch_size)
            out.append({"X": np.stack([data[i:i + self.block_size] for i in ix]),
                        "Y": np.stack([data[i + 1:i + 1 + self.block_size] for i in ix])})
        return out

    def step(self, s, batch):
        # train.py's loop body after the learning rate is set (no evaluation, checkpoints or
        # logging), one micro step
        prog, model, optimizer, scaler = s.prog, s.objs["model"], s.objs["optimizer"], \
            s.objs["scaler"]
        with prog.ctx:
            logits, loss = model(batch["X"], batch["Y"])
            loss = loss / prog.gradient_accumulation_steps
        scaler.scale(loss).backward()
        if prog.grad_clip != 0.0:
            scaler.unscale_(optimizer)
            s.lib.nn.utils.clip_grad_norm_(model.parameters(), prog.grad_clip)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        return loss


# ---- pytorch/examples imagenet with torchvision's ResNet-18 --------------------------------
class ResNet18(Program):
    name = "resnet18"
    runs = (("main.py", ("-a", "resnet18", "--evaluate", "-b", "64", "-j", "0", "-p", "1")),)
    title = ("ResNet-18 (pytorch/examples imagenet + torchvision resnet.py) on 64x64 digits, "
             "batch 16, cross-entropy, SGD momentum 0.9, weight decay")
    batch_size, size = 16, 64
    check_dtype = "float64"
    check_steps = 2
    rtol = 1e-9
    note = ("chaotic in float32: at the program's rate of 0.1 with momentum the loss jumps "
            "7.0 -> 4.8 -> 8.1, and the first convolution's weight gradient (a sum of 16,384 "
            "products that nearly cancel after BatchNorm's backward) comes out of OpenBLAS's "
            "float32 GEMM about 1e-3 off (PyTorch's oneDNN kernel: 5e-6), so the float32 runs "
            "part at 1.5e-4 in the second step; in float64 both agree to 1e-13")

    def build(self, prog, lib, deterministic):
        model = prog.models.__dict__["resnet18"]()
        criterion = prog.nn.CrossEntropyLoss()
        optimizer = lib.optim.SGD(model.parameters(), 0.1, momentum=0.9, weight_decay=1e-4)
        return Setup(self, prog, lib, {"model": model}, deterministic, model=model,
                     criterion=criterion, optimizer=optimizer)

    def batches(self, rng, n, batch_size=None, size=None):
        batch_size, size = batch_size or self.batch_size, size or self.size
        return [{"images": rng.standard_normal((batch_size, 3, size, size), dtype=np.float32),
                 "target": rng.integers(0, 10, batch_size).astype(np.int64)}
                for _ in range(n)]

    def check_batches(self, rng):
        return self.batches(rng, self.check_steps, batch_size=8, size=32)

    def step(self, s, batch):
        # train()'s loop body, without the accuracy meters
        model, criterion, optimizer = s.objs["model"], s.objs["criterion"], s.objs["optimizer"]
        output = model(batch["images"])
        loss = criterion(output, batch["target"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss


def verse_word_ids():
    """The word ids of word_language_model's training text, as its ``data.Corpus`` numbers them
    (a dictionary over train, valid and test in order of first appearance, ``<eos>`` after every
    line)."""
    words = {}
    ids = None
    for split in ("train", "valid", "test"):
        split_ids = []
        for line in (VERSE / f"{split}.txt").read_text(encoding="utf8").splitlines():
            for word in line.split() + ["<eos>"]:
                split_ids.append(words.setdefault(word, len(words)))
        ids = split_ids if ids is None else ids
    return np.array(ids, np.int64)


def verse_char_ids():
    """nanoGPT's training characters as ``data/verse_char/prepare.py`` numbers them (sorted
    characters of the whole text; the first 90% train)."""
    text = "".join((VERSE / f"{split}.txt").read_text(encoding="utf8")
                   for split in ("train", "valid", "test"))
    stoi = {c: i for i, c in enumerate(sorted(set(text)))}
    return np.array([stoi[c] for c in text[:int(len(text) * 0.9)]], np.int64)


PROGRAMS = {p.name: p for p in (Mnist(), MnistRnn(), Dcgan(), Vae(), SuperResolution(),
                                TimeSequence(), Regression(), WordLanguageModel(), NanoGpt(),
                                ResNet18())}

# the word language model's other models (``--model``, ``--tied``), checked step for step too
VARIANTS = {p.label: p for p in (WordLanguageModel("GRU"), WordLanguageModel("RNN_TANH"),
                                 WordLanguageModel("Transformer"),
                                 WordLanguageModel("LSTM", tied=True))}


def losses(outs):
    """A step's result (a loss, or a tuple of them) as a list of floats."""
    outs = outs if isinstance(outs, tuple) else (outs,)
    return [float(o.item()) for o in outs]


def check_run(program, framework, workdir, state, batches, captured=False):
    """The initial weights and the losses of ``program``'s first ``len(batches)`` steps under
    ``framework``, deterministic (dropout off, random draws from the batches), started from
    ``state`` (the weights of another run) or, if None, from the program's own initialisation;
    ``captured`` runs labkit's step under ``lk.function``."""
    s = program.setup(framework, workdir, deterministic=True)
    if state is None:
        state = s.state()
    else:
        s.load_state(state)
    if program.check_dtype == "float64":
        for m in s.modules.values():
            m.double()
        batches = [{k: v.astype(np.float64) if v.dtype == np.float32 else v
                    for k, v in b.items()} for b in batches]
    run = program.captured(s) if captured else program.eager(s)
    return state, [losses(run(s.batch(b))) for b in batches]
