"""The CUDA C that elementwise fusion writes for a GPU (``FusedProgram.cuda_source``), checked
without a GPU, and by CuPy itself where there is one: each program's statements are compiled as
C++ (whose <cmath> overloads ``exp``, ``pow``, ``fabs``... per type as CUDA's device maths does)
into a loop that does what ``cupy.ElementwiseKernel`` does per element, and run against the
unfused ops' own NumPy kernels. Every fusable op, on float32 and float64, over special values
(NaN, ±inf, ±0, huge, tiny) and every pair of them; and the programs the fusion pass makes of a
real chain.
"""
import ctypes
import itertools
import shutil
import subprocess

import numpy as np
import pytest

import labkit as lk
from labkit.graph import passes
from labkit.graph.passes.fusion import _ARITH, _COMPARE, FusedProgram, fused

from .test_passes import every_fusable_op_graph

pytestmark = pytest.mark.skipif(shutil.which("g++") is None,
                                reason="needs g++ (scripts/install installs it)")

_C = {"float32": "float", "float64": "double", "bool_": "bool"}
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 1e-30, 0.5, -2.5, 3.0, 20.0, -20.0,
           88.0, -104.0, 710.0]


def _literal(value, dtype):
    if dtype == "bool_":
        return "true" if value else "false"
    return f"({_C[dtype]}){float(value).hex()}"     # exact, then rounded as NumPy rounds it


def _function(k, program):
    """C++ for one program: ``void p<k>(long n, void** inputs, void* out)``."""
    _, _, operation = program.cuda_source()
    lines = [f'extern "C" void p{k}(long n, void** in, void* out) {{']
    for i, d in enumerate(program.in_dtypes):
        lines.append(f"  const {_C[d]}* x{i}_p = (const {_C[d]}*)in[{i}];")
    for name, value, d in program._literals().values():
        lines.append(f"  const {_C[d]} {name} = {_literal(value, d)};")
    out = _C[program.steps[-1][2]]
    lines.append(f"  {out}* y_p = ({out}*)out;")
    lines.append("  for (long i = 0; i < n; ++i) {")
    for i, d in enumerate(program.in_dtypes):
        lines.append(f"    const {_C[d]} x{i} = x{i}_p[i];")
    lines.append(f"    {out} y;")
    lines += ["    " + ln for ln in operation.splitlines()]
    lines += ["    y_p[i] = y;", "  }", "}"]
    return "\n".join(lines)


def _programs():
    """One program per op and dtype (pow with several literal exponents), plus the programs
    fusion makes of ``every_fusable_op`` on float32 and float64."""
    out = []
    for dt in ("float32", "float64"):
        for o, (name, _, _) in _ARITH.items():
            if name == "pow":
                for e in (2.0, 3.0, 0.5, -1.0, 2.5):
                    out.append(FusedProgram(((name, (("x", 0), ("c", e, dt)), dt),), (dt,)))
            elif name == "where":
                out.append(FusedProgram(((name, (("x", 0), ("x", 1), ("x", 2)), dt),),
                                        ("bool_", dt, dt)))
                out.append(FusedProgram(((name, (("x", 0), ("x", 1), ("c", 0.0, dt)), dt),),
                                        ("bool_", dt)))
            elif name in ("add", "sub", "mul", "div", "maximum", "minimum"):
                out.append(FusedProgram(((name, (("x", 0), ("x", 1)), dt),), (dt, dt)))
                out.append(FusedProgram(((name, (("x", 0), ("c", -1.5, dt)), dt),), (dt,)))
            else:
                out.append(FusedProgram(((name, (("x", 0),), dt),), (dt,)))
        for o, (name, _, _) in _COMPARE.items():
            out.append(FusedProgram(((name, (("x", 0), ("x", 1)), "bool_"),), (dt, dt)))
    lk.config.set_cpu_fusion("always")
    try:
        for dtype in (lk.float32, lk.float64):
            g, result = every_fusable_op_graph(dtype)
            opt = passes.fusion(g, outputs=[result])
            out += [n.attrs["program"] for n in opt.nodes if n.op is fused]
    finally:
        lk.config.set_cpu_fusion("cost")
    return out


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    programs = _programs()
    folder = tmp_path_factory.mktemp("fused_cuda")
    src = folder / "fused.cpp"
    src.write_text("#include <cmath>\nusing namespace std;\n\n" +
                   "\n\n".join(_function(k, p) for k, p in enumerate(programs)) + "\n")
    lib = folder / "fused.so"
    run = subprocess.run(["g++", "-std=c++17", "-O1", "-shared", "-fPIC", "-o", str(lib),
                          str(src)], capture_output=True, text=True)
    assert run.returncode == 0, f"the generated CUDA C does not compile:\n{run.stderr}"
    return programs, ctypes.CDLL(str(lib))


def _inputs(program, rng):
    """Arrays for the program's inputs: every pair of special values (and random ones) for
    the first two float inputs, random booleans for conditions."""
    n_float = sum(d != "bool_" for d in program.in_dtypes)
    values = np.array(SPECIAL + list(rng.standard_normal(16) * 4))
    columns = ([values] if n_float == 1 else
               [np.tile(values, len(values)), np.repeat(values, len(values))])
    n = len(columns[0])
    out, used = [], 0
    for d in program.in_dtypes:
        if d == "bool_":
            out.append(rng.random(n) < 0.5)
        else:
            col = columns[used] if used < len(columns) else rng.standard_normal(n)
            out.append(np.ascontiguousarray(col, dtype=np.dtype(d.rstrip("_"))))
            used += 1
    return out


def test_generated_cuda_c_computes_what_the_unfused_ops_compute(compiled):
    programs, lib = compiled
    rng = np.random.default_rng(0)
    checked = set()
    for k, program in enumerate(programs):
        inputs = _inputs(program, rng)
        with np.errstate(all="ignore"):
            want = np.asarray(program.run_reference(np, inputs))
        got = np.empty(want.shape, program.out_dtype.np)
        ptrs = (ctypes.c_void_p * len(inputs))(*[a.ctypes.data for a in inputs])
        fn = getattr(lib, f"p{k}")
        fn.argtypes = [ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
        fn(len(got), ptrs, got.ctypes.data)
        tol = 2e-6 if program.out_dtype is lk.float32 else 1e-13
        np.testing.assert_allclose(
            got, want.astype(got.dtype), rtol=tol, atol=0, equal_nan=True,
            err_msg=f"{program!r} on {program.in_dtypes}: the CUDA C differs from the ops")
        checked.update(program.ops)
    assert checked == {name for name, _, _ in itertools.chain(_ARITH.values(),
                                                               _COMPARE.values())}


def test_the_cpu_evaluator_agrees_on_the_same_special_values(compiled):
    pytest.importorskip("numexpr")
    programs, _ = compiled
    rng = np.random.default_rng(0)
    for program in programs:
        inputs = _inputs(program, rng)
        with np.errstate(all="ignore"):
            want = np.asarray(program.run_reference(np, inputs))
            got = program.run_cpu(inputs)
        tol = 2e-6 if program.out_dtype is lk.float32 else 1e-13
        np.testing.assert_allclose(
            got, want.astype(got.dtype), rtol=tol, atol=0, equal_nan=True,
            err_msg=f"{program!r} on {program.in_dtypes}: numexpr differs from the ops")


@pytest.mark.gpu
@pytest.mark.cupy
def test_the_real_cupy_kernel_agrees_on_the_same_special_values():
    """What the C++ stand-in above checks, on the GPU itself: every program built by CuPy as
    the ``ElementwiseKernel`` that fusion runs, against the unfused ops' NumPy kernels."""
    import cupy

    rng = np.random.default_rng(0)
    for program in _programs():
        inputs = _inputs(program, rng)
        with np.errstate(all="ignore"):
            want = np.asarray(program.run_reference(np, inputs))
        got = cupy.asnumpy(program.run_gpu(cupy, [cupy.asarray(a) for a in inputs]))
        tol = 2e-6 if program.out_dtype is lk.float32 else 1e-13
        # nvcc contracts a * b + c into one fused multiply-add (one rounding instead of two),
        # as PyTorch's own CUDA kernels do: where a chain cancels to near zero the relative
        # difference grows, the absolute one stays within a few ulps of the terms
        atol = 0 if len(program.steps) == 1 else 64 * np.finfo(got.dtype).eps
        np.testing.assert_allclose(
            got, want.astype(got.dtype), rtol=tol, atol=atol, equal_nan=True,
            err_msg=f"{program!r} on {program.in_dtypes}: CuPy's kernel differs from the ops")
