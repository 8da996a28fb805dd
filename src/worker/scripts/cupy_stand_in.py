# cugrade's stand-in for the `cupy` package, installed as `cupy/__init__.py` first on sys.path
# wherever a submission's Python runs without a real CuPy. One stand-in, two uses; the script
# that runs chooses by its global `CUPY_STAND_IN` (NumPy's use when it names none):
#
# "record": used only to FIND a submission's kernels (cupy_driver.py, and numba_driver.py for a
# module that imports cupy for its host arrays). It runs in the sandboxed compile worker with
# no GPU and no real CuPy: creating a `cp.RawKernel`, `cp.RawModule`, `cp.ElementwiseKernel` or
# `cp.ReductionKernel` records the definition (cugrade compiles it later, with NVRTC); array
# functions are NumPy's where NumPy can be imported; launching a kernel raises, as it would on
# a machine without a GPU.
#
# "numpy": grades a pipeline (a Python function over arrays) for CORRECTNESS on a machine
# without a GPU (python_harness.py). Every NumPy function, ufunc and constant is reachable as
# `cp.<name>`; arrays are `cp.ndarray`, a subclass of numpy.ndarray with CuPy's `.get()`, and
# results of operations stay that subclass (reductions give 0-d arrays, as CuPy's do).
# `cp.asarray` of a host array copies it, as an upload would, so a pipeline that writes into
# its "device" arrays never changes the caller's host arrays. The `cp.cuda` objects that
# pipelines touch (devices, streams, events, memory pools) exist and do nothing. What it does
# not do: run CuPy kernels (RawKernel, RawModule, ElementwiseKernel, ReductionKernel):
# defining one works, calling one raises StandInUnsupported. Nothing here says anything about
# speed: cugrade reports speed as not measured with this stand-in.
import sys as _sys
import types as _types

_MODE = getattr(_sys.modules.get("__main__"), "CUPY_STAND_IN", "numpy")


def fuse(*args, **kwargs):
    """`@cp.fuse` and `@cp.fuse(kernel_name=...)`: the function itself, unfused."""
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda f: f


memoize = fuse


if _MODE == "record":
    _registry = []
    _SRC = None  # set by the driver: the submission's folder

    def _site():
        """(file, line) of the innermost frame of a student file that made this call."""
        f = _sys._getframe(2)
        while f is not None:
            name = f.f_code.co_filename
            if _SRC and name.startswith(_SRC):
                return name, f.f_lineno
            f = f.f_back
        return None, None

    class _NoGpu(RuntimeError):
        pass

    def _no_gpu(what):
        raise _NoGpu(
            f"{what} needs a GPU: cugrade reads the kernel definitions without running them "
            "(code under `if __name__ == '__main__':` is not run)"
        )

    class _Kernel:
        _kind = "?"

        def __init__(self, **fields):
            file, line = _site()
            self._cugrade = dict(fields, kind=self._kind, file=file, line=line)
            _registry.append(self)

        def __call__(self, *args, **kwargs):
            _no_gpu(f"launching {self._kind} `{self._cugrade.get('name')}`")

        def __repr__(self):
            return f"<cugrade stand-in {self._kind} {self._cugrade.get('name')!r}>"

    class RawKernel(_Kernel):
        _kind = "raw_kernel"

        def __init__(self, code, name, options=(), backend="nvrtc", translate_cucomplex=False,
                     *, enable_cooperative_groups=False, jitify=False):
            super().__init__(code=str(code), name=str(name), options=[str(o) for o in options])

        @property
        def attributes(self):
            return {}

        def compile(self, *args, **kwargs):
            pass

    class _Function:
        def __init__(self, module, name):
            self.module = module
            self.name = name

        def __call__(self, *args, **kwargs):
            _no_gpu(f"launching `{self.name}`")

    class RawModule(_Kernel):
        _kind = "raw_module"

        def __init__(self, code=None, path=None, options=(), backend="nvrtc",
                     translate_cucomplex=False, *, enable_cooperative_groups=False,
                     name_expressions=None, jitify=False):
            if code is None:
                raise ValueError("cugrade grades RawModule(code=...) only: a `path=` to a cubin "
                                 "or PTX file is not CUDA source")
            super().__init__(code=str(code), name=None, options=[str(o) for o in options])
            self._cugrade["functions"] = []

        def get_function(self, name):
            self._cugrade["functions"].append(str(name))
            return _Function(self, str(name))

        def compile(self, *args, **kwargs):
            pass

    class ElementwiseKernel(_Kernel):
        _kind = "elementwise"

        def __init__(self, in_params, out_params, operation, name="kernel", reduce_dims=True,
                     preamble="", no_return=False, return_tuple=False, loop_prep="",
                     after_loop="", options=()):
            super().__init__(in_params=str(in_params), out_params=str(out_params),
                             operation=str(operation), name=str(name), preamble=str(preamble),
                             loop_prep=str(loop_prep), after_loop=str(after_loop),
                             options=[str(o) for o in options])

    class ReductionKernel(_Kernel):
        _kind = "reduction"

        def __init__(self, in_params, out_params, map_expr, reduce_expr, post_map_expr,
                     identity, name="reduce_kernel", reduce_type=None, reduce_dims=True,
                     preamble="", options=()):
            super().__init__(in_params=str(in_params), out_params=str(out_params),
                             map_expr=str(map_expr), reduce_expr=str(reduce_expr),
                             post_map_expr=str(post_map_expr),
                             identity=None if identity is None else str(identity),
                             name=str(name),
                             reduce_type=None if reduce_type is None else str(reduce_type),
                             preamble=str(preamble), options=[str(o) for o in options])

    class _Anything:
        """`cp.cuda.Device(0).synchronize()`, `cp.cuda.Stream.null`, events, the memory pool:
        accepted and ignored while definitions are read."""

        def __init__(self, *args, **kwargs):
            pass

        def __call__(self, *args, **kwargs):
            return _Anything()

        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return _Anything()

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    cuda = _Anything()
    cuda.Device = _Anything
    cuda.Stream = _Anything

    def _numpy():
        try:
            import numpy
        except ImportError:
            _no_gpu("this array operation")
        return numpy

    def asnumpy(a, *args, **kwargs):
        return _numpy().asarray(a)

    def get_array_module(*args):
        return _numpy()

    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(_numpy(), name)

else:
    import functools as _functools
    import time as _time

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
