"""Ordinary PyTorch tensor code, written once and run under both libraries (``import torch as
T`` / ``import labkit as T``): the same results, dtypes and shapes, and the same gradients.

Each program below is plain PyTorch: the forms the issue lists (positional shapes and dims,
``cat([a, b], dim)``, ``x.size(0)``, namedtuple results, in-place updates, PyTorch's dtype
promotion, NumPy's ``axis=`` / ``keepdims=`` where PyTorch also takes them...).
"""
import numpy as np
import pytest
import torch

import labkit

DATA = np.random.default_rng(7).standard_normal((3, 4))


def shapes_and_joins(T):
    x = T.arange(12, dtype=T.float32).reshape(3, 4)
    out = {"reshape": T.reshape(x, (4, 3)), "view": x.view(2, 6), "view-1": x.view(-1),
           "permute": T.permute(x.reshape(3, 2, 2), (2, 0, 1)),
           "permute_method": x.reshape(3, 2, 2).permute(2, 0, 1),
           "broadcast_to": T.broadcast_to(T.tensor([1.0, 2.0, 3.0, 4.0]), (3, 4)),
           "expand": x[:1].expand(3, -1), "expand_new": x.expand(2, 3, 4),
           "cat0": T.cat([x, x * 2], 0), "cat1": T.cat([x, x], dim=1),
           "concat": T.concat([x, x], dim=-1), "stack": T.stack([x, x + 1], 1),
           "flatten": T.flatten(x.reshape(3, 2, 2), 1, 2), "flatten_method": x.flatten(),
           "t": x.t(), "T": x.T, "mT": x.reshape(1, 3, 4).mT, "transpose": x.transpose(0, 1),
           "unsqueeze": x.unsqueeze(1), "squeeze": x.reshape(1, 3, 1, 4).squeeze(),
           "squeeze_dim": x.reshape(1, 3, 4).squeeze(0), "view_as": x.view_as(x.t()),
           "reshape_as": x.reshape_as(x.t()), "expand_as": x[:1].expand_as(x),
           "contiguous": x.t().contiguous()}
    for i, piece in enumerate(T.split(x, 2, 1)):
        out[f"split{i}"] = piece
    for i, piece in enumerate(x.split([1, 2], dim=0)):
        out[f"split_sections{i}"] = piece
    for i, piece in enumerate(x.chunk(3, 1)):
        out[f"chunk{i}"] = piece
    out["sizes"] = (x.size(0), x.size(-1), tuple(x.size()), tuple(x.shape), x.numel(), x.dim(),
                    x.ndim, len(x))
    return out


def reductions_and_namedtuples(T):
    x = T.tensor(DATA)
    values, indices = x.max(1)
    _, pred = (x * 2).max(dim=1)
    low = T.min(x, dim=0, keepdim=True)
    return {"max_values": values, "max_indices": indices, "pred": pred,
            "min_values": low.values, "min_indices": low.indices, "max_all": x.max(),
            "max_elementwise": T.max(x, x.flip(0)),
            "min_elementwise": T.min(x, -x), "sum": T.sum(x, 1), "sum_dims": x.sum((0, 1)),
            "sum_keepdim": x.sum(dim=0, keepdim=True), "mean": x.mean(1),
            "mean_axis": T.mean(x, axis=0), "sum_dtype": T.sum(x, 0, dtype=T.float32),
            "argmax": x.argmax(1), "argmin": T.argmin(x, dim=0)}


def promotion(T):
    i = T.tensor([1, 2, 3])
    f32 = T.ones(3)
    f64 = T.ones(3, dtype=T.float64)
    return {"int_times_float": i * 1.5, "int_div_int": i / 2, "int_div_tensor": i / i,
            "int_plus_f32": i + f32, "f32_times_f64_scalar": f32 * T.tensor(2.0, dtype=T.float64),
            "f32_plus_f64": f32 + f64, "int_plus_int": i + 2, "bool_plus_int": (i > 1) + 1,
            "compare_mixed": i > 1.5, "float_literal": T.tensor(2.5), "int_literal": T.tensor(2),
            "int_pow_float": i ** 0.5, "where_mixed": T.where(i > 1, i, 0.5),
            "int8": T.tensor([1, 2], dtype=T.int8) + T.tensor([3, 4], dtype=T.uint8)}


def inplace_updates(T):
    x = T.zeros(2, 3)
    x += 1
    x.mul_(3)
    x[0].add_(T.tensor([1.0, 2.0, 3.0]))
    x -= T.ones(3)
    x /= 2
    x.clamp_(min=1.0)
    y = x.clone()
    y.zero_()
    y.copy_(x * 2)
    z = T.ones(3, dtype=T.int64)
    z *= 5
    z += T.tensor([1, 2, 3])
    w = x.clone()
    w.data.mul_(10)
    w[0, 1] = 2.5
    w[w > 20] = 0.0
    w[:, -1] += 1
    return {"x": x, "y": y, "z": z, "w": w}


def methods_and_conversions(T):
    x = T.tensor(DATA, dtype=T.float32)
    return {"double": x.double(), "long": (x * 10).long(), "type": x.type(T.float64),
            "to_dtype": x.to(T.float64), "to_device": x.to("cpu"),
            "new_zeros": x.new_zeros(2, 2), "new_ones": x.new_ones((1, 3)),
            "new_full": x.new_full((2,), 7.0), "new_tensor": x.new_tensor([1, 2]),
            "eq": x.eq(x), "ne": x.ne(0), "lt": x.lt(0), "ge": x.ge(0),
            "clamp": x.clamp(min=-0.5, max=0.5), "clamp_method": x.clamp(0.0),
            "masked_fill": x.masked_fill(x > 0, 0.0), "tolist": x.tolist(),
            "item": x[0, 0].item(), "detach": x.detach(), "data": x.data,
            "numel": x.numel(), "is_floating_point": x.is_floating_point(),
            "device_type": x.device.type, "arange_long": T.arange(3, dtype=T.long),
            "zeros_float": T.zeros(2, dtype=T.float), "to_double": x.to(T.double),
            "to_half": x.to(T.half), "ones_int": T.ones(2, dtype=T.int),
            "tensor_short": T.tensor([1, 2], dtype=T.short), "to_bool": x.gt(0).to(T.bool),
            "long_is_int64": T.long is T.int64 and T.float is T.float32}


def sorting_and_statistics(T):
    x = T.tensor(DATA)
    values, order = x.sort(dim=1, descending=True)
    top, where = T.topk(x, 2)
    med = x.median(dim=0)
    k = x.kthvalue(2, dim=1)
    m = T.tensor([[1, 2, 2], [3, 3, 1]]).mode(1)
    return {"sort": values, "order": order, "topk": top, "topk_idx": where,
            "median": med.values, "median_idx": med.indices, "kth": k.values,
            "mode": m.values, "std": x.std(), "std_dim": x.std(1, unbiased=False),
            "var": T.var(x, dim=0, correction=0), "cumsum": x.cumsum(1), "prod": x.prod(1),
            "amax": x.amax(dim=(0, 1)), "logsumexp": T.logsumexp(x, 1),
            "any": (x > 1).any(), "all": (x > -5).all(dim=1), "argsort": x.argsort(0),
            "unique": T.unique(T.tensor([3, 1, 3, 2])),
            "count": T.count_nonzero(x > 0, dim=0)}


def more_ops(T):
    x = T.tensor(DATA)
    i = T.tensor([[7, -3], [5, 2]])
    F = T.nn.functional
    return {"floor_div": i // 2, "mod": i % 3, "true_div": i / 4, "and": i & 3, "shift": i << 1,
            "not": ~(i > 0), "sin": x.sin(), "erf": T.erf(x), "round": T.round(x * 10, decimals=1),
            "clamp_t": x.clamp(min=T.zeros(4, dtype=T.float64)), "where": T.where(x > 0, x, 0.0),
            "einsum": T.einsum("ij,kj->ik", x, x), "mm": T.mm(x, x.t()), "outer": T.outer(x[0], x[1]),
            "norm": x.norm(), "vector_norm": T.linalg.vector_norm(x, 1, dim=1),
            "pad": F.pad(x, (1, 2), value=0.5), "one_hot": F.one_hot(T.tensor([0, 2]), 3),
            "index_select": x.index_select(1, T.tensor([3, 0])), "flip": x.flip(1),
            "roll": x.roll(1, 0), "tril": x.tril(), "gather": x.gather(1, T.tensor([[0], [1], [2]])),
            "scatter_add": T.zeros(3, 4, dtype=T.float64).scatter_add(1, T.tensor([[1], [1], [3]]),
                                                                       x[:, :1]),
            "mixed_index": x.reshape(3, 2, 2)[0, :, T.tensor([1, 0, 1])],
            "tuple_index": x[(0, 2),], "bool_index": x[x > 0.5], "arange": T.arange(0, 1, 0.25),
            "linspace": T.linspace(0, 1, 5), "eye": T.eye(2, 3), "full": T.full((2,), 3),
            "zeros_like": T.zeros_like(x, dtype=T.int32)}


PROGRAMS = [shapes_and_joins, sorting_and_statistics, more_ops, reductions_and_namedtuples, promotion, inplace_updates,
            methods_and_conversions]


def _normal(value):
    """A result as a comparable plain value: tensors become (dtype name, array)."""
    if isinstance(value, (torch.Tensor, labkit.Tensor)):
        array = value.detach().numpy() if isinstance(value, torch.Tensor) else value.detach().numpy()
        return ("tensor", str(array.dtype), np.asarray(array))
    if isinstance(value, (tuple, list)):
        return type(value)(_normal(v) for v in value)
    return value


def _assert_same(a, b, where):
    if isinstance(a, tuple) and a[:1] == ("tensor",):
        assert isinstance(b, tuple) and b[:1] == ("tensor",), f"{where}: {b!r} is not a tensor"
        assert a[1] == b[1], f"{where}: dtype {a[1]} (labkit) != {b[1]} (PyTorch)"
        assert a[2].shape == b[2].shape, f"{where}: shape {a[2].shape} != {b[2].shape}"
        np.testing.assert_allclose(a[2].astype(np.float64), b[2].astype(np.float64),
                                   rtol=1e-6, atol=1e-6, err_msg=where)
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), where
        for i, (u, v) in enumerate(zip(a, b)):
            _assert_same(u, v, f"{where}[{i}]")
    elif isinstance(a, float):
        assert a == pytest.approx(b, rel=1e-6), where
    else:
        assert a == b, f"{where}: {a!r} (labkit) != {b!r} (PyTorch)"


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_the_same_pytorch_code_gives_the_same_results(program):
    ours, theirs = program(labkit), program(torch)
    assert set(ours) == set(theirs)
    for key in theirs:
        _assert_same(_normal(ours[key]), _normal(theirs[key]), f"{program.__name__}: {key}")


def training_step(T):
    """A few lines of a training loop, with in-place updates and namedtuple unpacking."""
    w = T.tensor(DATA[:, :2].copy(), requires_grad=True)
    b = T.zeros(2, dtype=T.float64, requires_grad=True)
    x = T.tensor(DATA.T.copy())
    target = T.tensor([0, 1, 1, 0])
    for _ in range(3):
        logits = x @ w + b
        h = logits * 1
        h.clamp_(min=-1.0)
        h += 0.5
        scores, best = h.max(1)
        loss = (T.logsumexp(h, 1) - h.gather(1, target.unsqueeze(1)).squeeze(1)).mean()
        loss = loss + 0.1 * scores.sum()
        loss.backward()
        with T.no_grad():
            w -= 0.1 * w.grad
            b.sub_(0.1 * b.grad)
            w.grad.zero_()
            b.grad.zero_()
    return {"w": w, "b": b, "loss": loss, "best": best}


def test_the_same_training_step_gives_the_same_parameters():
    ours, theirs = training_step(labkit), training_step(torch)
    for key in theirs:
        _assert_same(_normal(ours[key]), _normal(theirs[key]), f"training_step: {key}")


def test_the_questions_programs_ask_before_they_start():
    # the first lines of PyTorch programs: which device, which backend switches, which dtypes
    import labkit.backends.cudnn as cudnn
    import labkit.backends.mps as mps

    assert labkit.cuda.is_available() == (labkit.devices.gpu_count() > 0)
    assert labkit.cuda.device_count() == labkit.devices.gpu_count()
    assert labkit.accelerator.is_available() == labkit.cuda.is_available()
    if not labkit.cuda.is_available():
        assert labkit.accelerator.current_accelerator() is None
        assert torch.accelerator.current_accelerator() is None or torch.cuda.is_available()
    else:
        assert labkit.accelerator.current_accelerator() is labkit.device("cuda")
    for T in (torch, labkit):
        device = T.device("cuda" if T.cuda.is_available() else "cpu")
        assert T.zeros(2, device=device).device.type == device.type
        T.backends.cudnn.benchmark = True
        T.backends.cudnn.benchmark = False
    assert mps.is_available() is mps.is_built() is False and cudnn.benchmark is False
    for name in labkit.cuda.__all__:          # lk.cuda's names are torch.cuda's spellings
        assert hasattr(torch.cuda, name), f"torch.cuda has no {name}"
    for T in (torch, labkit):                 # seeding boilerplate runs without a GPU
        T.cuda.manual_seed_all(0)
    for name in ("float", "double", "half", "long", "int", "short", "bool"):
        ours, theirs = getattr(labkit, name), getattr(torch, name)
        assert ours.np == torch.empty(0, dtype=theirs).numpy().dtype, name
        assert labkit.zeros(2, dtype=ours).dtype is ours


def test_the_switches_and_flags_real_programs_touch():
    # nanoGPT sets backends.cuda.matmul.allow_tf32 and cudnn.allow_tf32; DCGAN tests is_xpu;
    # pytorch/examples imagenet imports torch.utils.data.distributed
    import labkit.utils.data.distributed as distributed
    for T in (torch, labkit):
        saved = T.backends.cuda.matmul.allow_tf32, T.backends.cudnn.allow_tf32
        T.backends.cuda.matmul.allow_tf32 = True
        T.backends.cudnn.allow_tf32 = True
        T.backends.cuda.matmul.allow_tf32, T.backends.cudnn.allow_tf32 = saved
        x = T.zeros(2)
        assert (x.is_cpu, x.is_cuda, x.is_xpu, x.is_mps) == (True, False, False, False)
    assert distributed.DistributedSampler is labkit.data.DistributedSampler


def test_hub_refuses_pickled_checkpoints_and_caches_safetensors(tmp_path):
    src = tmp_path / "weights.safetensors"
    labkit.save({"w": labkit.arange(3.0)}, str(src))
    cache = tmp_path / "cache"
    state = labkit.hub.load_state_dict_from_url(src.as_uri(), model_dir=str(cache),
                                                map_location="cpu")
    assert state["w"].tolist() == [0.0, 1.0, 2.0] and (cache / "weights.safetensors").exists()
    src.unlink()                               # read from the cache from now on
    again = labkit.hub.load_state_dict_from_url(src.as_uri(), model_dir=str(cache))
    assert again["w"].tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(labkit.CheckpointError, match="safetensors checkpoints only"):
        labkit.hub.load_state_dict_from_url(
            "https://download.pytorch.org/models/resnet18-5c106cde.pth", model_dir=str(cache))
