"""oneDNN's direct convolutions (``labkit.devices.host_dnnl``): the forward and both gradients
against labkit's own NumPy routes run in float64, for every geometry and memory layout the
convolution takes; the cases it declines; its use inside the conv2d op; threads and fork."""
import multiprocessing
import os
import platform
import subprocess
import sys
import threading

import numpy as np
import pytest

from labkit.devices import host_dnnl
from labkit.tensor.ops import conv

needs_dnnl = pytest.mark.skipif(host_dnnl.available() is None,
                                reason="oneDNN's library is not installed here")

# (n, c, h, w), out channels, kernel, stride, padding, dilation
_GEOMETRIES = [
    ((2, 3, 9, 9), 4, (3, 3), (1, 1), (1, 1), (1, 1)),
    ((2, 5, 8, 7), 6, (3, 2), (2, 1), (1, 0), (1, 1)),      # unequal kernel, stride, padding
    ((1, 4, 8, 8), 3, (3, 3), (2, 2), (0, 0), (1, 1)),      # the last row and column unread
    ((2, 3, 6, 6), 2, (2, 2), (1, 1), (2, 2), (1, 1)),      # padding > k - 1
    ((2, 4, 9, 10), 5, (3, 3), (1, 2), (2, 1), (2, 2)),     # dilation
    ((3, 6, 5, 5), 7, (1, 1), (2, 2), (0, 0), (1, 1)),      # 1x1, stride 2
    ((2, 16, 12, 12), 32, (4, 4), (2, 2), (1, 1), (1, 1)),  # DCGAN's 4x4 stride 2
]


def _float64_routes(x, w, g, geo):
    """labkit's NumPy routes (oneDNN serves float32 only): y, dx, dw."""
    x, w, g = (a.astype(np.float64) for a in (x, w, g))
    kw = dict(geo, groups=1)
    return (conv.convolution.kernel(np, x, w, **kw),
            conv.conv2d_input_grad.kernel(np, g, w, image_shape=x.shape, **kw),
            conv.conv2d_weight_grad.kernel(np, g, x, weight_shape=w.shape, **kw))


def _close(got, want):
    assert got is not None and got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@needs_dnnl
@pytest.mark.parametrize("shape, out_channels, kernel, stride, padding, dilation", _GEOMETRIES)
def test_convolution_and_its_gradients_match_the_numpy_routes(shape, out_channels, kernel,
                                                              stride, padding, dilation):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((out_channels, shape[1]) + kernel).astype(np.float32)
    geo = dict(stride=stride, padding=padding, dilation=dilation)
    y = host_dnnl.conv2d(x, w, stride, padding, dilation)
    g = rng.standard_normal(y.shape).astype(np.float32)
    want_y, want_dx, want_dw = _float64_routes(x, w, g, geo)
    _close(y, want_y)
    _close(host_dnnl.conv2d_input_grad(g, w, shape, stride, padding, dilation), want_dx)
    _close(host_dnnl.conv2d_weight_grad(g, x, w.shape, stride, padding, dilation), want_dw)


@needs_dnnl
@pytest.mark.parametrize("layout", ["channels last", "sliced", "reversed"])
def test_operands_are_read_in_any_layout(layout):
    """A channels-last view, a slice of a larger array, and negative strides (copied first)
    give what the contiguous operands give; the output is a new C-contiguous array."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 6, 7, 7)).astype(np.float32)
    w = rng.standard_normal((4, 6, 3, 3)).astype(np.float32)
    geo = ((1, 1), (1, 1), (1, 1))
    want = host_dnnl.conv2d(x, w, *geo)
    if layout == "channels last":
        xv = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    elif layout == "sliced":
        big = np.zeros((3, 8, 9, 9), np.float32)
        big[:2, 1:7, 1:8, 2:9] = x
        xv = big[:2, 1:7, 1:8, 2:9]
    else:
        xv = x[:, :, ::-1, ::-1].copy()[:, :, ::-1, ::-1]
    assert not xv.flags.c_contiguous
    got = host_dnnl.conv2d(xv, w, *geo)
    assert got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(xv, x)                   # the input is not written


@needs_dnnl
def test_what_it_does_not_serve_returns_none():
    x = np.ones((1, 2, 5, 5), np.float32)
    w = np.ones((3, 2, 3, 3), np.float32)
    geo = ((1, 1), (0, 0), (1, 1))
    assert host_dnnl.conv2d(x.astype(np.float64), w.astype(np.float64), *geo) is None
    assert host_dnnl.conv2d(x, w.astype(np.float64), *geo) is None
    assert host_dnnl.conv2d(x, np.ones((3, 1, 3, 3), np.float32), *geo) is None   # groups
    assert host_dnnl.conv2d(x[:, :, :2], w, *geo) is None                         # no output
    assert host_dnnl.conv2d(np.ones((0, 2, 5, 5), np.float32), w, *geo) is None   # empty
    assert host_dnnl.conv2d(x.tolist(), w, *geo) is None
    g = np.ones((1, 3, 3, 3), np.float32)
    assert host_dnnl.conv2d_input_grad(g, w, (1, 4, 5, 5), *geo) is None         # channels
    assert host_dnnl.conv2d_weight_grad(g, x, (3, 1, 3, 3), *geo) is None


@needs_dnnl
def test_the_conv2d_op_takes_it_where_direct_says_and_its_routes_elsewhere(monkeypatch):
    monkeypatch.setattr(host_dnnl, "threads", lambda: 1)
    calls = []       # the calls oneDNN served

    def served(*args, f, name):
        out = f(*args)
        if out is not None:
            calls.append(name)
        return out
    for name in ("conv2d", "conv2d_input_grad", "conv2d_weight_grad"):
        monkeypatch.setattr(host_dnnl, name, lambda *a, f=getattr(host_dnnl, name), n=name:
                            served(*a, f=f, name=n))
    rng = np.random.default_rng(2)
    geo = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    for dtype, image, channels, want in (
            (np.float32, (4, 16, 8, 8), 16, ["conv2d", "conv2d_input_grad", "conv2d_weight_grad"]),
            (np.float64, (4, 16, 8, 8), 16, []),                  # float32 only
            (np.float32, (4, 3, 8, 8), 16, ["conv2d", "conv2d_weight_grad"]),  # 3 channels in
            (np.float32, (2, 16, 2, 2), 16, [])):                 # 8 positions in all
        calls.clear()
        x = rng.standard_normal(image).astype(dtype)
        w = rng.standard_normal((channels, image[1], 3, 3)).astype(dtype)
        y = conv.convolution.kernel(np, x, w, **geo)
        g = rng.standard_normal(y.shape).astype(dtype)
        dx = conv.conv2d_input_grad.kernel(np, g, w, image_shape=x.shape, **geo)
        dw = conv.conv2d_weight_grad.kernel(np, g, x, weight_shape=w.shape, **geo)
        assert calls == want, (dtype, image)
        for got, ref in zip((y, dx, dw), _float64_routes(x, w, g, {k: geo[k] for k in
                                                                    ("stride", "padding",
                                                                     "dilation")})):
            assert got.dtype == dtype
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


@needs_dnnl
def test_primitives_are_kept_per_shape_up_to_the_cache_size(monkeypatch):
    monkeypatch.setattr(host_dnnl, "_CACHE", 3)
    monkeypatch.setattr(host_dnnl, "_plans", type(host_dnnl._plans)())
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    for size in (5, 6, 7, 8, 5):
        x = rng.standard_normal((1, 2, size, size)).astype(np.float32)
        got = host_dnnl.conv2d(x, w, (1, 1), (0, 0), (1, 1))
        want = _float64_routes(x, w, np.zeros_like(got), dict(stride=(1, 1), padding=(0, 0),
                                                               dilation=(1, 1)))[0]
        _close(got, want)
    assert len(host_dnnl._plans) == 3                # 5 was made again after eviction


@needs_dnnl
def test_threads_run_convolutions_at_once_with_their_own_values():
    rng = np.random.default_rng(4)
    cases = [(rng.standard_normal((2, 8, 10, 10)).astype(np.float32),
              rng.standard_normal((8, 8, 3, 3)).astype(np.float32)) for _ in range(4)]
    want = [host_dnnl.conv2d(x, w, (1, 1), (1, 1), (1, 1)) for x, w in cases]
    got, errors = [None] * 4, []

    def run(i):
        try:
            for _ in range(20):
                got[i] = host_dnnl.conv2d(*cases[i], (1, 1), (1, 1), (1, 1))
                assert np.array_equal(got[i], want[i])
        except Exception as e:        # reported below
            errors.append(e)
    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def _convolve_in_child(queue, x, w, want):
    got = host_dnnl.conv2d(x, w, (1, 1), (1, 1), (1, 1))
    queue.put(got is not None and bool(np.array_equal(got, want)))


@needs_dnnl
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_convolves_after_the_parent_did():
    """GNU OpenMP's pool does not survive fork: the child must not wait for its threads."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 16, 16, 16)).astype(np.float32)
    w = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    want = host_dnnl.conv2d(x, w, (1, 1), (1, 1), (1, 1))
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_convolve_in_child, args=(queue, x, w, want))
    child.start()
    child.join(60)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child hung in its convolution")
    assert child.exitcode == 0 and queue.get(timeout=5)


def test_the_op_leaves_it_to_blas_threads_where_openmp_has_several(monkeypatch):
    monkeypatch.setattr(host_dnnl, "threads", lambda: 2)
    monkeypatch.setattr(host_dnnl, "conv2d", lambda *a: pytest.fail("oneDNN was called"))
    x = np.ones((4, 16, 8, 8), np.float32)
    w = np.ones((16, 16, 3, 3), np.float32)
    y = conv.convolution.kernel(np, x, w, stride=(1, 1), padding=(1, 1), dilation=(1, 1),
                                groups=1)
    assert y[0, 0, 0, 0] == 64.0 and y[0, 0, 1, 1] == 144.0


def test_it_can_be_turned_off_and_is_there_where_the_lock_installs_it():
    code = "from labkit.devices import host_dnnl; print(host_dnnl.available())"
    env = dict(os.environ, LABKIT_HOST_DNNL="0")
    off = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert off.stdout.strip() == "None"
    if sys.platform.startswith("linux") and platform.machine() == "x86_64":
        # the wheel is locked for this platform: without it convolutions are silently slower
        assert host_dnnl.available() is not None


def _gelu64(x, g):
    """GELU and g * GELU' in float64 (SciPy's erf)."""
    from scipy.special import erf
    x = x.astype(np.float64)
    cdf = 0.5 * (1 + erf(x / np.sqrt(2)))
    pdf = np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)
    return x * cdf, g.astype(np.float64) * (cdf + x * pdf)


@needs_dnnl
@pytest.mark.parametrize("shape", [(12, 64, 512), (16384,), (3, 7, 1000)])
def test_gelu_and_its_gradient_match_float64(shape):
    rng = np.random.default_rng(6)
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    x.reshape(-1)[:4] = [0.0, -0.0, 9.0, -9.0]
    g = rng.standard_normal(shape).astype(np.float32)
    want_y, want_dx = _gelu64(x, g)
    y, dx = host_dnnl.gelu(x), host_dnnl.gelu_backward(g, x)
    for got, want in ((y, want_y), (dx, want_dx)):
        assert got.shape == shape and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6)
    # a strided view is read as its values
    np.testing.assert_array_equal(host_dnnl.gelu(np.asfortranarray(x)), y)


@needs_dnnl
def test_gelu_declines_what_numpy_serves_better_or_it_cannot():
    x = np.ones(1 << 14, np.float32)
    assert host_dnnl.gelu(x[:100]) is None                       # small
    assert host_dnnl.gelu(x.astype(np.float64)) is None
    assert host_dnnl.gelu_backward(x[:-1], x[1:].copy()[:-1]) is None   # still small
    assert host_dnnl.gelu_backward(np.ones((2, 1 << 14), np.float32), x) is None  # broadcast


@needs_dnnl
@pytest.mark.parametrize("slope", [0.01, 0.2, 1.5, -0.3])
def test_leaky_relu_and_its_gradient_match_numpy_bit_for_bit(slope, monkeypatch):
    # oneDNN's relu with a slope: the same products and selections, so the same bits, NaN and
    # signed zeros included; where x holds a NaN the op's backward keeps to NumPy's rule (the
    # slope's side, as PyTorch's), which oneDNN's kernel does not
    from labkit.tensor.ops.nn_kernels import leaky_relu, leaky_relu_backward
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 32, 32, 32)).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    x.reshape(-1)[:4] = [0.0, -0.0, np.inf, -np.inf]
    with monkeypatch.context() as m:
        m.setattr(host_dnnl, "threads", lambda: 2)          # the NumPy routes
        want_y = leaky_relu.kernel(np, x, negative_slope=slope)
        want_dx = leaky_relu_backward.kernel(np, g, x, negative_slope=slope)
    y, dx = host_dnnl.leaky_relu(x, slope), host_dnnl.leaky_relu_backward(g, x, slope)
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(np.signbit(y), np.signbit(want_y))
    np.testing.assert_array_equal(dx, want_dx)
    monkeypatch.setattr(host_dnnl, "threads", lambda: 1)
    x[0, 0, 0, 5] = np.nan
    dx = leaky_relu_backward.kernel(np, g, x, negative_slope=slope)
    assert dx[0, 0, 0, 5] == np.float32(slope) * g[0, 0, 0, 5]
    assert host_dnnl.leaky_relu(x[:1, :1], slope) is None                  # small


def _layer_norm64(x, g, ndim, eps=1e-5):
    """LayerNorm's normalisation (no affine part) and its gradient, in float64."""
    axes = tuple(range(x.ndim - ndim, x.ndim))
    x, g = x.astype(np.float64), g.astype(np.float64)
    rstd = 1 / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    xhat = (x - x.mean(axis=axes, keepdims=True)) * rstd
    return xhat, rstd * (g - g.mean(axis=axes, keepdims=True) -
                         xhat * (g * xhat).mean(axis=axes, keepdims=True))


@needs_dnnl
@pytest.mark.parametrize("shape, ndim", [((12, 64, 128), 1), ((4, 33, 130), 1),
                                         ((8, 16, 8, 16), 2), ((16384,), 1)])
def test_layer_norm_and_its_gradient_match_float64(shape, ndim):
    rng = np.random.default_rng(8)
    x = (rng.standard_normal(shape) * 4 + 3).astype(np.float32)
    x.reshape(-1, int(np.prod(shape[len(shape) - ndim:])))[0] = 5.0       # a constant row
    g = rng.standard_normal(shape).astype(np.float32)
    want_y, want_dx = _layer_norm64(x, g, ndim)
    y = host_dnnl.layer_norm(x, ndim, 1e-5)
    dx = host_dnnl.layer_norm_backward(g, x, ndim, 1e-5)
    for got, want in ((y, want_y), (dx, want_dx)):
        assert got.shape == shape and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())
    # a strided view is read as its values; another eps is another primitive
    np.testing.assert_array_equal(host_dnnl.layer_norm(np.asfortranarray(x), ndim, 1e-5), y)
    np.testing.assert_allclose(host_dnnl.layer_norm(x, ndim, 10.0),
                               _layer_norm64(x, g, ndim, eps=10.0)[0], rtol=1e-4, atol=1e-5)


@needs_dnnl
@pytest.mark.parametrize("shape, ndim", [((12, 64, 128), 1), ((8, 16, 8, 16), 2)])
@pytest.mark.parametrize("bias", [False, True])
def test_layer_norm_with_weight_and_bias_matches_float64(shape, ndim, bias):
    rng = np.random.default_rng(9)
    x = (rng.standard_normal(shape) * 4 + 3).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    normalised = shape[len(shape) - ndim:]
    w = rng.standard_normal(normalised).astype(np.float32)
    b = rng.standard_normal(normalised).astype(np.float32) if bias else None
    xhat, want_dx = _layer_norm64(x, g * w, ndim)
    lead = tuple(range(len(shape) - ndim))
    want_y = xhat * w + (b if bias else 0)
    want_grads = [want_dx, (g * xhat).sum(axis=lead)] + ([g.sum(axis=lead)] if bias else [])
    y = host_dnnl.layer_norm(x, ndim, 1e-5, w, b)
    packed = host_dnnl.layer_norm_backward(g, x, ndim, 1e-5, w, bias)
    assert packed.shape == (x.size + w.size * (1 + bias),) and packed.dtype == np.float32
    grads = np.split(packed, [x.size, x.size + w.size])[:2 + bias]
    assert len(grads) == len(want_grads)
    for got, want in zip([y] + grads, [want_y] + want_grads):
        np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-4,
                                   atol=1e-5 * np.abs(want).max())
    # a weight of another dtype or size is declined, not misread
    assert host_dnnl.layer_norm(x, ndim, 1e-5, w.astype(np.float64)) is None
    assert host_dnnl.layer_norm_backward(g, x, ndim, 1e-5, w.reshape(-1)[1:].copy()) is None
    assert host_dnnl.layer_norm_backward(g, x, ndim, 1e-5, None, bias=True) is None


@needs_dnnl
def test_layer_norm_declines_what_it_cannot_serve():
    x = np.ones((128, 128), np.float32)
    assert host_dnnl.layer_norm(x[:8], 1, 1e-5) is None                   # small
    assert host_dnnl.layer_norm(x.astype(np.float64), 1, 1e-5) is None
    assert host_dnnl.layer_norm(x, 3, 1e-5) is None                       # ndim > rank
    assert host_dnnl.layer_norm_backward(x[:, :64].copy(), x, 1, 1e-5) is None   # shapes


@needs_dnnl
@pytest.mark.parametrize("m, k, n", [(768, 512, 128), (20, 200, 800), (64, 9216, 128)])
@pytest.mark.parametrize("ta, tb", [(False, False), (False, True), (True, False)])
def test_matmul_matches_float64_in_each_layout(m, k, n, ta, tb):
    rng = np.random.default_rng(11)
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    a, b = (a.T if ta else a), (b.T if tb else b)              # transposed views, not copies
    want = a.astype(np.float64) @ b.astype(np.float64)
    got = host_dnnl.matmul(a, b)
    assert got.shape == (m, n) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())
    out = np.full((m, n), np.nan, np.float32)
    assert host_dnnl.matmul(a, b, out) is out
    np.testing.assert_array_equal(out, got)


@needs_dnnl
def test_small_and_float64_products_do_not_load_the_library():
    """A program of small or float64 products and layers (convolutions, pooling and LSTMs
    included) never loads oneDNN (about 17 MB); a large float32 product does, at one OpenMP
    thread."""
    code = ("import labkit as lk; from labkit.devices import host_dnnl\n"
            "F = lk.nn.functional\n"
            "lk.ones(64, 64) @ lk.ones(64, 64); lk.ones(256, 256, dtype=lk.float64) @ "
            "lk.ones(256, 256, dtype=lk.float64)\n"
            "x = lk.randn(64, 512, dtype=lk.float64, requires_grad=True)\n"
            "y = F.gelu(x) + F.leaky_relu(x) + lk.softmax(x, -1) + F.layer_norm(x, (512,))\n"
            "y.sum().backward()\n"
            "im = lk.randn(4, 16, 32, 32, dtype=lk.float64, requires_grad=True)\n"
            "w = lk.randn(16, 16, 3, 3, dtype=lk.float64, requires_grad=True)\n"
            "lk.max_pool2d(F.conv2d(im, w, padding=1), 2).sum().backward()\n"
            "out, _ = lk.nn.LSTM(8, 8, dtype=lk.float64)(lk.randn(5, 3, 8, dtype=lk.float64))\n"
            "out.sum().backward()\n"
            "print(host_dnnl._state['where'] is None)\n"
            "lk.ones(256, 256) @ lk.ones(256, 256)\n"
            "print(host_dnnl._state['where'] is not None)\n")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"], done.stdout


@needs_dnnl
def test_matmul_declines_what_it_cannot_serve():
    a, b = np.ones((256, 256), np.float32), np.ones((256, 64), np.float32)
    assert host_dnnl.matmul(a, b) is not None
    assert host_dnnl.matmul(a[:64, :64], b[:64]) is None                  # small
    assert host_dnnl.matmul(a.astype(np.float64), b) is None
    assert host_dnnl.matmul(a[None], b) is None                           # 3-D
    assert host_dnnl.matmul(a, b[:128]) is None                           # inner sizes
    assert host_dnnl.matmul(a, b, np.empty((256, 64), np.float64)) is None
    assert host_dnnl.matmul(a, b, np.empty((64, 256), np.float32)) is None
    # a layout oneDNN reads only with its slow kernels is left to NumPy
    wide = np.ones((256, 512), np.float32)
    assert host_dnnl.matmul(wide[:, ::2], b) is None


def _softmax64(x, g, log):
    """softmax (or log_softmax) over the last dimension and its gradient, in float64."""
    x, g = x.astype(np.float64), g.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    y = e / e.sum(axis=-1, keepdims=True)
    if log:
        return np.log(y), g - y * g.sum(axis=-1, keepdims=True)
    return y, y * (g - (g * y).sum(axis=-1, keepdims=True))


@needs_dnnl
@pytest.mark.parametrize("shape", [(12, 4, 64, 64), (700, 443), (1, 16384)])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_and_its_gradient_match_float64(shape, log):
    rng = np.random.default_rng(10)
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    x.reshape(-1, shape[-1])[0, :3] = [80.0, 80.0, -80.0]        # exp would overflow unshifted
    g = rng.standard_normal(shape).astype(np.float32)
    want_y, want_dx = _softmax64(x, g, log)
    y = host_dnnl.softmax(x, log=log)
    dx = host_dnnl.softmax_backward(g, y, log=log)
    for got, want in ((y, want_y), (dx, want_dx)):
        assert got.shape == shape and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-6 * np.abs(want).max())
    np.testing.assert_array_equal(host_dnnl.softmax(np.asfortranarray(x), log=log), y)
    assert host_dnnl.softmax(x[..., :8].copy()[:2]) is None                 # small
    assert host_dnnl.softmax_backward(g.astype(np.float64), y) is None


@needs_dnnl
@pytest.mark.parametrize("layer", ["gelu", "layer_norm", "softmax", "log_softmax",
                                   "leaky_relu"])
def test_the_ops_take_it_at_one_thread_eager_and_captured(layer, monkeypatch):
    import labkit as lk
    functional = lk.nn.functional
    apply, reference, tol = {
        "leaky_relu": (lambda t: functional.leaky_relu(t, 0.2),
                       lambda x, g: (np.where(x > 0, x, 0.2 * x), np.where(x > 0, g, 0.2 * g)),
                       dict(rtol=1e-6, atol=0)),
        "gelu": (functional.gelu, _gelu64, dict(rtol=1e-5, atol=2e-6)),
        "layer_norm": (lambda t: functional.layer_norm(t, (64,)),
                       lambda x, g: _layer_norm64(x, g, 1), dict(rtol=1e-4, atol=1e-5)),
        "softmax": (lambda t: lk.softmax(t, dim=-1), lambda x, g: _softmax64(x, g, False),
                    dict(rtol=1e-4, atol=1e-6)),
        "log_softmax": (lambda t: lk.log_softmax(t, dim=2), lambda x, g: _softmax64(x, g, True),
                        dict(rtol=1e-4, atol=1e-5))}[layer]
    layer = layer.replace("log_", "")       # host_dnnl's softmax kernels take log= for both
    monkeypatch.setattr(host_dnnl, "threads", lambda: 1)
    served = []
    for name in (layer, layer + "_backward"):
        monkeypatch.setattr(host_dnnl, name, lambda *a, f=getattr(host_dnnl, name), n=name,
                            **k: served.append(n) or f(*a, **k))
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((8, 64, 64)) * 2 + 1).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    want_y, want_dx = reference(x, g)

    def step(t, c):
        return lk.grad(lambda t: (apply(t) * c).sum())(t)
    for run in (step, lk.function(step)):
        served.clear()
        t = lk.tensor(x)
        np.testing.assert_allclose(apply(t).numpy(), want_y, **tol)
        np.testing.assert_allclose(run(t, lk.tensor(g)).numpy(), want_dx, **tol)
        assert set(served) == {layer, layer + "_backward"}


# ---- LSTM layers -------------------------------------------------------------------------------
def _lstm_inputs(rng, length, n, c, h, bias):
    x = rng.standard_normal((length, n, c))
    w_ih, w_hh = rng.standard_normal((4 * h, c)) * 0.4, rng.standard_normal((4 * h, h)) * 0.4
    h0, c0 = rng.standard_normal((n, h)), rng.standard_normal((n, h))
    return [x, w_ih, w_hh, h0, c0] + ([rng.standard_normal(4 * h) * 0.4] if bias else [])


@needs_dnnl
@pytest.mark.parametrize("length, n, c, h, bias", [(7, 3, 5, 4, True), (1, 1, 1, 1, True),
                                                   (12, 20, 16, 32, False), (3, 2, 40, 8, True)])
def test_lstm_and_its_gradients_match_float64(length, n, c, h, bias):
    from labkit.tensor.ops.recurrent_layer import lstm_layer, lstm_layer_backward
    rng = np.random.default_rng(length)
    inputs = _lstm_inputs(rng, length, n, c, h, bias)
    g = rng.standard_normal((length + 1, n, h))
    # lstm_layer's NumPy route in float64 (the op table checks it against PyTorch's)
    want_y = lstm_layer.kernel(np, *inputs)
    want_grads = lstm_layer_backward.kernel(np, g, want_y, *inputs)
    f32 = [a.astype(np.float32) for a in inputs]
    g32 = g.astype(np.float32)
    y = host_dnnl.lstm(*f32)
    np.testing.assert_allclose(y, want_y, rtol=1e-4, atol=1e-5)
    # without a kept forward the backward runs the training forward first; with one, it reads
    # the gates that forward kept with its result: the same values
    grads = host_dnnl.lstm_backward(g32, *f32, out=y)
    np.testing.assert_allclose(grads, want_grads, rtol=1e-4, atol=1e-4)
    kept = host_dnnl.lstm(*f32, keep=True)
    np.testing.assert_array_equal(kept, y)
    assert host_dnnl._kept_workspace(kept, *f32) is not None
    # not for other arrays (a copy of the input)
    assert host_dnnl._kept_workspace(kept, f32[0].copy(), *f32[1:]) is None
    # used by one backward, then dropped: a second one runs the forward again
    np.testing.assert_array_equal(host_dnnl.lstm_backward(g32, *f32, out=kept), grads)
    assert host_dnnl._kept_workspace(kept, *f32) is None
    np.testing.assert_array_equal(host_dnnl.lstm_backward(g32, *f32, out=kept), grads)
    # and dropped once the result is gone
    before = len(host_dnnl._workspaces)
    kept = host_dnnl.lstm(*f32, keep=True)
    assert len(host_dnnl._workspaces) == before + 1
    del kept
    assert len(host_dnnl._workspaces) == before


@needs_dnnl
def test_lstm_declines_what_it_cannot_serve():
    rng = np.random.default_rng(0)
    x, w_ih, w_hh, h0, c0, b = (a.astype(np.float32) for a in _lstm_inputs(rng, 3, 2, 4, 5, True))
    g = np.zeros((4, 2, 5), np.float32)
    assert host_dnnl.lstm(x.astype(np.float64), w_ih, w_hh, h0, c0, b) is None    # dtype
    assert host_dnnl.lstm(x[:, 0], w_ih, w_hh, h0[0], c0[0], b) is None          # no batch dim
    assert host_dnnl.lstm(x, w_ih, w_hh, h0[:1], c0, b) is None                   # broadcast h0
    assert host_dnnl.lstm(x[:0], w_ih, w_hh, h0, c0, b) is None                   # no steps
    assert host_dnnl.lstm(x, w_ih[:, :3], w_hh, h0, c0, b) is None                # mismatched
    assert host_dnnl.lstm_backward(g[:3], x, w_ih, w_hh, h0, c0, b) is None       # cotangent
    assert host_dnnl.lstm_backward(g.astype(np.float64), x, w_ih, w_hh, h0, c0, b) is None


@needs_dnnl
@pytest.mark.parametrize("bidirectional, batch_first", [(False, False), (True, True)])
def test_nn_lstm_takes_it_at_one_thread_eager_and_captured(bidirectional, batch_first,
                                                           monkeypatch):
    import labkit as lk
    monkeypatch.setattr(host_dnnl, "threads", lambda: 1)
    served = []
    for name in ("lstm", "lstm_backward"):
        monkeypatch.setattr(host_dnnl, name, lambda *a, f=getattr(host_dnnl, name), n=name,
                            **k: served.append(n) or f(*a, **k))
    lk.manual_seed(3)
    model = lk.nn.LSTM(6, 8, num_layers=2, bidirectional=bidirectional, batch_first=batch_first)
    wide = lk.nn.LSTM(6, 8, num_layers=2, bidirectional=bidirectional, batch_first=batch_first,
                      dtype=lk.float64)
    wide.load_state_dict({k: v.to(lk.float64) for k, v in model.state_dict().items()})
    x = np.random.default_rng(1).standard_normal((4, 9, 6) if batch_first else (9, 4, 6))

    def loss(m, t):
        out, (h, c) = m(t)
        return (out * out).sum() + (h * c).sum()

    def step(m, t):
        m.zero_grad()
        value = loss(m, t)
        value.backward()
        return value
    want = step(wide, lk.tensor(x)).item()
    want_grads = [p.grad.numpy() for p in wide.parameters()]
    for run in (step, lk.function(step)):
        served.clear()
        got = run(model, lk.tensor(x.astype(np.float32))).item()
        assert got == pytest.approx(want, rel=1e-5)
        for p, w in zip(model.parameters(), want_grads):
            np.testing.assert_allclose(p.grad.numpy(), w, rtol=1e-4, atol=1e-4)
        layers = 2 * (2 if bidirectional else 1)
        assert served.count("lstm") == served.count("lstm_backward") == layers


# ---- max pooling's gradient ------------------------------------------------------------------
@needs_dnnl
@pytest.mark.parametrize("shape, kernel, stride, padding, dilation", [
    ((8, 16, 24, 24), (2, 2), (2, 2), ((0, 0), (0, 0)), (1, 1)),      # mnist's
    ((2, 3, 9, 9), (3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1)),          # overlapping, padded
    ((2, 3, 10, 9), (3, 2), (1, 2), ((1, 2), (0, 1)), (2, 1)),         # ceil_mode's, dilated
])
@pytest.mark.parametrize("ties", [False, True])
def test_max_pool_gradient_matches_the_numpy_route(shape, kernel, stride, padding, dilation,
                                                   ties):
    # the gradient goes to each window's first largest element, also among equal ones
    from labkit.tensor.ops.conv import max_pool, max_pool_backward
    rng = np.random.default_rng(4)
    x = (rng.integers(-2, 3, shape) if ties else rng.standard_normal(shape)).astype(np.float32)
    geo = dict(kernel_size=kernel, stride=stride, padding=padding, dilation=dilation)
    out = max_pool.kernel(np, x, **geo)
    g = rng.standard_normal(out.shape).astype(np.float32)
    want = max_pool_backward.kernel(np, g.astype(np.float64), x.astype(np.float64),
                                    out.astype(np.float64), **geo)
    np.testing.assert_allclose(host_dnnl.max_pool_backward(g, x, kernel, stride, padding,
                                                           dilation), want, rtol=1e-6)
    assert host_dnnl.max_pool_backward(g.astype(np.float64), x, kernel, stride, padding,
                                       dilation) is None


@needs_dnnl
def test_max_pool_op_leaves_windows_with_a_nan_to_numpy(monkeypatch):
    import labkit as lk
    monkeypatch.setattr(host_dnnl, "threads", lambda: 1)
    served = []
    monkeypatch.setattr(host_dnnl, "max_pool_backward", lambda *a, f=host_dnnl.max_pool_backward:
                        served.append(1) or f(*a))
    x = np.arange(32, dtype=np.float32).reshape(1, 2, 4, 4)
    for nan in (False, True):
        served.clear()
        xs = x.copy()
        if nan:
            xs[0, 0, 0, 0] = np.nan
        t = lk.tensor(xs, requires_grad=True)
        lk.max_pool2d(t, 2).sum().backward()
        want = np.zeros_like(xs)
        want[..., 1::2, 1::2] = 1
        if nan:                     # the NaN is its window's maximum, as PyTorch's
            want[0, 0, 0, 0], want[0, 0, 1, 1] = 1, 0
        np.testing.assert_array_equal(t.grad.numpy(), want)
        assert served == ([] if nan else [1])


@needs_dnnl
def test_nn_lstm_backward_twice_with_retain_graph(monkeypatch):
    # the first backward uses the workspace the forward kept and drops it; the second runs
    # oneDNN's forward again for it: the same gradients
    import labkit as lk
    monkeypatch.setattr(host_dnnl, "threads", lambda: 1)
    lk.manual_seed(5)
    model = lk.nn.LSTM(5, 6)
    out, _ = model(lk.randn(4, 3, 5))
    loss = (out * out).sum()
    loss.backward(retain_graph=True)
    once = [p.grad.numpy().copy() for p in model.parameters()]
    loss.backward()
    for p, g in zip(model.parameters(), once):
        np.testing.assert_allclose(p.grad.numpy(), 2 * g, rtol=1e-6)
