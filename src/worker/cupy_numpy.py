# cugrade's NumPy stand-in for the `cupy` package, used to grade a pipeline (a Python function
# over arrays) for CORRECTNESS on a machine without a GPU. It is installed as a package
# `cupy/__init__.py` first on sys.path of the sandboxed worker, so `import cupy as cp` gets it.
#
# What it does: every NumPy function, ufunc and constant is reachable as `cp.<name>`; arrays
# are `cp.ndarray`, a subclass of numpy.ndarray with CuPy's `.get()`, and results of
# operations stay that subclass (reductions give 0-d arrays, as CuPy's do). `cp.asarray`
# of a host array copies it, as an upload would, so a pipeline that writes into its
# "device" arrays never changes the caller's host arrays. The `cp.cuda` objects that
# pipelines touch (devices, streams, events, memory pools) exist and do nothing.
# What it does not do: run CuPy kernels (RawKernel, RawModule, ElementwiseKernel,
# ReductionKernel): defining one works, calling one raises StandInUnsupported. Nothing here
# says anything about speed: cugrade reports speed as not measured with this stand-in.
import functools as _functools
import sys as _sys
import time as _time
import types as _types

import numpy as _np

__cugrade_stand_in__ = True
__version__ = "numpy-stand-in " + _np.__version__


class StandInUnsupported(RuntimeError):
    """A CuPy feature that the NumPy stand-in cannot provide without a GPU."""


def _unsupported(what):
    raise StandInUnsupported(
        f"{what}: CuPy kernels inside a pipeline need a GPU; without one, NumPy stands in "
        "for CuPy's array functions only (grade on a GPU machine to run this code)"
    )


class ndarray(_np.ndarray):
    """numpy.ndarray plus CuPy's host-transfer methods."""

    def __array_wrap__(self, obj, context=None, return_scalar=False):
        # Keep the subclass, and keep 0-d results as arrays (CuPy's reductions return 0-d
        # arrays, never scalars, so `x.sum().get()` works there and must work here).
        if isinstance(obj, _np.ndarray):
            return obj.view(type(self))
        return obj

    def __array_function__(self, func, types, args, kwargs):
        # np.concatenate(cupy arrays) returns a CuPy array on a GPU (CuPy implements
        # __array_function__); NumPy alone would return a plain ndarray.
        return _wrap(super().__array_function__(func, types, args, kwargs))

    # CuPy's sorts are stable (kind=None means "stable"); NumPy's default quicksort is not.
    def argsort(self, axis=-1, kind=None, order=None, *, stable=None):
        return super().argsort(axis=axis, kind="stable")

    def sort(self, axis=-1, kind=None, order=None, *, stable=None):
        super().sort(axis=axis, kind="stable")

    def get(self, stream=None, order="C", out=None, blocking=True):
        host = _np.array(self, order=order)  # a plain numpy.ndarray copy
        if out is not None:
            out[...] = host
            return out
        return host

    def set(self, arr, stream=None):
        self[...] = arr

    @property
    def device(self):
        return cuda.Device(0)


def _wrap(r):
    """A NumPy result as CuPy would return it: arrays (and scalars) as cp.ndarray."""
    if isinstance(r, ndarray):
        return r
    if isinstance(r, _np.ndarray):
        return r.view(ndarray)
    if isinstance(r, _np.generic):
        return _np.asarray(r).view(ndarray)
    if isinstance(r, tuple):
        return type(r)(*map(_wrap, r)) if hasattr(r, "_fields") else tuple(map(_wrap, r))
    if isinstance(r, list):
        return [_wrap(x) for x in r]
    if isinstance(r, (_np.random.Generator, _np.random.RandomState)):
        return _Wrapped(r)
    return r


def _wrap_callable(f):
    @_functools.wraps(f)
    def call(*args, **kwargs):
        return _wrap(f(*args, **kwargs))

    return call


class _Ufunc:
    """A NumPy ufunc whose results (and those of .reduce, .outer, ...) are wrapped."""

    def __init__(self, uf):
        self._uf = uf
        self.__name__ = uf.__name__
        self.__doc__ = uf.__doc__

    def __call__(self, *args, **kwargs):
        return _wrap(self._uf(*args, **kwargs))

    def __getattr__(self, name):
        attr = getattr(self._uf, name)
        return _wrap_callable(attr) if callable(attr) else attr


class _Wrapped:
    """A NumPy namespace (numpy.random, numpy.linalg, a Generator) with wrapped results."""

    def __init__(self, target):
        self._target = target

    def __getattr__(self, name):
        return _lookup(self._target, name)


def _lookup(ns, name):
    obj = getattr(ns, name)
    if isinstance(obj, type):  # dtypes (cp.float32), exception classes: NumPy's own
        return obj
    if isinstance(obj, _np.ufunc):
        return _Ufunc(obj)
    if isinstance(obj, _types.ModuleType):
        return _Wrapped(obj)
    if callable(obj):
        return _wrap_callable(obj)
    return obj  # constants: cp.pi, cp.inf, cp.newaxis


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        return _lookup(_np, name)
    except AttributeError:
        raise AttributeError(
            f"module 'cupy' (cugrade's NumPy stand-in) has no attribute {name!r}"
        ) from None


class _Random(_Wrapped):
    """cp.random: NumPy's functions; CuPy's `dtype=` also where NumPy's lack it."""

    _CAST = {"rand", "randn", "random", "random_sample", "ranf", "sample", "uniform",
             "normal", "standard_normal", "lognormal", "exponential", "standard_exponential",
             "gamma", "standard_gamma", "beta"}

    def __getattr__(self, name):
        f = _lookup(self._target, name)
        if name not in self._CAST:
            return f

        def call(*args, dtype=None, **kwargs):
            r = f(*args, **kwargs)
            return r if dtype is None else r.astype(dtype, copy=False)

        return call


random = _Random(_np.random)  # cp.linalg, cp.fft, ...: module __getattr__ wraps them


# --- host <-> "device" -------------------------------------------------------------------


def asarray(a, dtype=None, order=None, *, blocking=False):
    if isinstance(a, ndarray):  # already on the "device": no copy unless the dtype changes
        return _np.asarray(a, dtype=dtype, order=order).view(ndarray)
    return _np.array(a, dtype=dtype, order=order or "K", copy=True).view(ndarray)


def array(obj, dtype=None, copy=True, order="K", subok=False, ndmin=0, *, blocking=False):
    return _np.array(obj, dtype=dtype, copy=copy, order=order, ndmin=ndmin).view(ndarray)


def asnumpy(a, stream=None, order="C", out=None, *, blocking=True):
    if isinstance(a, ndarray):
        return a.get(order=order, out=out)
    host = _np.asarray(a, order=order)
    if out is not None:
        out[...] = host
        return out
    return host


def argsort(a, axis=-1, kind=None):
    return _wrap(_np.argsort(a, axis=axis, kind="stable"))


def sort(a, axis=-1, kind=None):
    return _wrap(_np.sort(a, axis=axis, kind="stable"))


def get_array_module(*args):
    """This module if any argument is a (stand-in) CuPy array, else numpy, as CuPy does."""
    return _sys.modules[__name__] if any(isinstance(a, ndarray) for a in args) else _np


def fuse(*args, **kwargs):
    """`@cp.fuse` and `@cp.fuse(kernel_name=...)`: the function itself, unfused."""
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda f: f


memoize = fuse


# --- kernels: defined freely, never run ----------------------------------------------------


class _Kernel:
    def __init__(self, *args, **kwargs):
        self._definition = (args, kwargs)

    def __call__(self, *args, **kwargs):
        _unsupported(f"calling a cp.{type(self).__name__}")

    def compile(self, *args, **kwargs):
        _unsupported(f"compiling a cp.{type(self).__name__}")


class RawKernel(_Kernel): pass
class ElementwiseKernel(_Kernel): pass
class ReductionKernel(_Kernel): pass


class RawModule(_Kernel):
    def get_function(self, name):
        _unsupported(f"cp.RawModule.get_function({name!r})")


# --- cp.cuda: synchronisation and memory pools that have nothing to do --------------------


class _Pool:
    """A memory pool that holds nothing."""

    def free_all_blocks(self, stream=None): pass
    def free_all_free(self): pass
    def set_limit(self, size=None, fraction=None): pass
    def used_bytes(self): return 0
    def total_bytes(self): return 0
    def free_bytes(self): return 0
    def n_free_blocks(self): return 0
    def get_limit(self): return 0


_memory_pool = _Pool()
_pinned_memory_pool = _Pool()


def get_default_memory_pool():
    return _memory_pool


def get_default_pinned_memory_pool():
    return _pinned_memory_pool


class _Context:
    """Usable as `with ...:`; synchronize() has nothing to wait for."""

    def __init__(self, *args, **kwargs):
        pass

    def synchronize(self):
        pass

    def use(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Device(_Context):
    def __init__(self, device=None):
        self.id = 0 if device is None else int(device)


class _Stream(_Context):
    null = None

    def __init__(self, null=False, non_blocking=False, ptds=False):
        pass

    def record(self, event=None):
        event = event if event is not None else _Event()
        event.record()
        return event


_Stream.null = _Stream(null=True)


class _Event(_Context):
    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self._t = None

    def record(self, stream=None):
        self._t = _time.perf_counter()

    @property
    def done(self):
        return True


def _get_elapsed_time(start, end):
    return (end._t - start._t) * 1e3  # milliseconds, as CuPy's


cuda = _types.SimpleNamespace(
    Device=_Device,
    Stream=_Stream,
    Event=_Event,
    get_current_stream=lambda device_id=None: _Stream.null,
    get_elapsed_time=_get_elapsed_time,
    runtime=_types.SimpleNamespace(deviceSynchronize=lambda: None),
    MemoryPool=_Pool,
    PinnedMemoryPool=_Pool,
    __cugrade_stand_in__=True,
)
