# Tests of cugrade's NumPy stand-in for CuPy (src/worker/scripts/cupy_stand_in.py in its NumPy
# use, the one a script without `CUPY_STAND_IN` gets), installed the way the worker installs
# it: as a package `cupy/__init__.py` first on sys.path.
# Run: PYTHONPATH=<dir with numpy> python3 ci/test-cupy-stand-in.py   (exit 0: all passed)
import os
import shutil
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
STAND_IN = os.path.join(HERE, "..", "src", "worker", "scripts", "cupy_stand_in.py")

tmp = tempfile.mkdtemp(prefix="cugrade-cupy-stand-in-")
os.mkdir(os.path.join(tmp, "cupy"))
shutil.copy(STAND_IN, os.path.join(tmp, "cupy", "__init__.py"))
sys.path.insert(0, tmp)
import cupy as cp  # noqa: E402

failures = []


def check(name, cond):
    if not cond:
        failures.append(name)
        print("FAIL", name)


def is_dev(x):
    return type(x) is cp.ndarray


# module identity
check("stand-in flag", cp.__cugrade_stand_in__ is True)
check("version", cp.__version__ == "numpy-stand-in " + np.__version__)
check("get_array_module", cp.get_array_module(cp.zeros(1)) is cp)
check("get_array_module host", cp.get_array_module(np.zeros(1), 1.0) is np)
check("get_array_module mixed", cp.get_array_module(np.zeros(1), cp.zeros(1)) is cp)
check("dtypes are numpy's", cp.float32 is np.float32 and cp.int32 is np.int32)
check("dtype works", cp.dtype("float32") == np.float32)
check("constants", cp.pi == np.pi and cp.newaxis is None and cp.inf == np.inf)

# uploads copy; downloads are plain copies
host = np.arange(5, dtype=np.float32)
d = cp.asarray(host)
check("asarray subclass", is_dev(d) and isinstance(d, np.ndarray))
d[0] = 42
check("asarray copies host", host[0] == 0)
check("asarray of device: no copy", cp.asarray(d) is not None and cp.asarray(d).base is not None)
check("asarray dtype", cp.asarray(host, dtype=cp.float64).dtype == np.float64)
check("array copies", is_dev(cp.array([1, 2, 3])) and cp.array(d) is not d)
g = d.get()
check("get plain copy", type(g) is np.ndarray and g[0] == 42)
g[1] = -1
check("get is a copy", d[1] == 1)
check("asnumpy plain", type(cp.asnumpy(d)) is np.ndarray)
check("asnumpy of host", type(cp.asnumpy(host)) is np.ndarray)
out = np.empty(5, np.float32)
check("get(out=)", d.get(out=out) is out and out[0] == 42)

# creation functions
for name, x in [
    ("zeros", cp.zeros((3, 2), dtype=cp.float32)),
    ("ones", cp.ones(3)),
    ("empty", cp.empty(4, cp.int32)),
    ("full", cp.full(3, 7.0)),
    ("arange", cp.arange(10)),
    ("linspace", cp.linspace(0, 1, 5)),
    ("zeros_like", cp.zeros_like(host)),
    ("ones_like", cp.ones_like(d)),
    ("empty_like", cp.empty_like(d)),
    ("full_like", cp.full_like(d, 3)),
    ("eye", cp.eye(3)),
]:
    check("creation " + name, is_dev(x))
check("zeros default float64", cp.zeros(2).dtype == np.float64)

# operations stay on the "device"
a = cp.arange(10, dtype=cp.float32)
b = cp.asarray(np.ones(10, np.float32))
check("binary op", is_dev(a + b) and is_dev(a * 2) and is_dev(2 - a))
check("np ufunc on device array", is_dev(np.log1p(a)))
check("cp ufunc", is_dev(cp.log1p(a)) and cp.log1p(a).dtype == np.float32)
check("cp ufunc on host array", is_dev(cp.sqrt(host)))
check("ufunc method", is_dev(cp.add.reduce(a)) and is_dev(cp.add.outer(a, a)))
check("clip", is_dev(cp.clip(a, 2, 5)) and float(cp.clip(a, 2, 5).max()) == 5)
check("fancy index", is_dev(a[cp.asarray([1, 3])]) and is_dev(a[a > 3]))
check("slice", is_dev(a[2:5]) and is_dev(a.reshape(2, 5)) and is_dev(a.astype(cp.float64)))
s = a.sum()
check("reduction method 0-d", is_dev(s) and s.ndim == 0 and float(s) == 45.0)
check("reduction 0-d get", type(s.get()) is np.ndarray and s.get() == 45.0)
check("cp reduction 0-d", is_dev(cp.sum(a)) and is_dev(cp.mean(a)) and is_dev(cp.std(a)))
check("mean float32", a.mean().dtype == np.float32 and cp.std(a).dtype == np.float32)
check("np reduction", is_dev(np.sum(a)))
check("comparison with 0-d", bool(a.std() > 0) and int(a.argmax()) == 9)
check("concatenate", is_dev(cp.concatenate([a, b])) and is_dev(cp.stack([a, b], axis=1)))
check("np concatenate", is_dev(np.concatenate([a, b])))
check("tuple results", all(is_dev(x) for x in cp.unique(a, return_counts=True)))
check("nonzero", all(is_dev(x) for x in cp.nonzero(a)))
check("split list", all(is_dev(x) for x in cp.split(a, 2)))
check("where", is_dev(cp.where(a > 3, a, 0)))
grp = cp.asarray(np.array([0, 1, 1, 3], np.int32))
bc = cp.bincount(grp, weights=cp.asarray(np.ones(4, np.float32)), minlength=5)
check("bincount", is_dev(bc) and bc.shape == (5,) and bc.dtype == np.float64)
check("argsort", is_dev(cp.argsort(a)) and is_dev(a.argsort()))
# many ties: NumPy's default (quicksort) orders them differently from a stable sort
tie_host = np.random.default_rng(0).integers(0, 3, 1000).astype(np.float32)
stable = np.argsort(tie_host, kind="stable")
check("test has unstable ties", not (np.argsort(tie_host) == stable).all())
ties = cp.asarray(tie_host)
check("argsort stable", (cp.argsort(ties).get() == stable).all())
check("method argsort stable", (ties.argsort().get() == stable).all())
check("sort", is_dev(cp.sort(a)) and float(cp.sort(-a)[0]) == -9.0)
oh = cp.zeros((4, 4), dtype=cp.float32)
oh[cp.arange(4), grp] = 1
check("one-hot assignment", float(oh.sum()) == 4.0 and is_dev(oh))
check("linalg", is_dev(cp.linalg.norm(a)))
check("fft", is_dev(cp.fft.fft(a)))

# random
check("random.rand", is_dev(cp.random.rand(3)))
check("random.random dtype", cp.random.random(3, dtype=cp.float32).dtype == np.float32)
check("random.randint", is_dev(cp.random.randint(0, 5, size=4)))
cp.random.seed(0)
rng = cp.random.default_rng(1)
check("default_rng", is_dev(rng.random(3)) and is_dev(rng.integers(0, 3, 4)))

# cuda namespace
cp.cuda.Device(0).synchronize()
with cp.cuda.Device(0):
    pass
cp.cuda.Stream.null.synchronize()
cp.cuda.get_current_stream().synchronize()
cp.cuda.runtime.deviceSynchronize()
with cp.cuda.Stream(non_blocking=True) as st:
    st.synchronize()
e0, e1 = cp.cuda.Event(), cp.cuda.Event()
e0.record()
e1.record()
e1.synchronize()
check("elapsed time", cp.cuda.get_elapsed_time(e0, e1) >= 0)
for pool in (cp.get_default_memory_pool(), cp.get_default_pinned_memory_pool()):
    pool.free_all_blocks()
    check("pool bytes", pool.used_bytes() == 0 and pool.total_bytes() == 0)
check("device attr", a.device.id == 0)


# fuse
@cp.fuse
def f1(x):
    return x + 1


@cp.fuse(kernel_name="f2")
def f2(x):
    return x * 2


check("fuse", float(f1(a)[0]) == 1.0 and float(f2(a)[1]) == 2.0)

# kernels: defined fine, never run
rk = cp.RawKernel(r'extern "C" __global__ void k(float* x) {}', "k")
ek = cp.ElementwiseKernel("float32 x", "float32 y", "y = x", "ek")
rd = cp.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "rd")
rm = cp.RawModule(code=r'extern "C" __global__ void k(float* x) {}')
for name, call in [
    ("RawKernel", lambda: rk((1,), (1,), (a,))),
    ("ElementwiseKernel", lambda: ek(a)),
    ("ReductionKernel", lambda: rd(a)),
    ("RawModule.get_function", lambda: rm.get_function("k")),
]:
    try:
        call()
        check(name + " raises", False)
    except cp.StandInUnsupported as e:
        check(name + " message", "need a GPU" in str(e) and "NumPy stands in" in str(e))
check("StandInUnsupported is RuntimeError", issubclass(cp.StandInUnsupported, RuntimeError))

# unknown names
try:
    cp.no_such_function_here
    check("unknown attribute raises", False)
except AttributeError as e:
    check("unknown attribute message", "stand-in" in str(e))
check("hasattr works", not hasattr(cp, "no_such_function_here") and hasattr(cp, "bincount"))

shutil.rmtree(tmp)
if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("cupy stand-in: all checks passed")
