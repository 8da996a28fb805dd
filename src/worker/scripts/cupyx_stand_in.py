# cugrade's stand-in for the `cupyx` package, beside its `cupy` stand-in (cupy_stand_in.py), in
# the same use as that one (its `_MODE`). Every `cupyx` module imports.
#
# "record" (finding a submission's kernels in the sandboxed compile worker): what a cupyx module
# holds is accepted and ignored while definitions are read, as `cp.cuda` is: nothing here runs
# on data. A kernel written with `cupyx.jit` is the one thing that cannot be graded: decorating
# one raises, saying so at the student's line.
#
# "numpy" (a pipeline graded for correctness on a machine without a GPU): what has a sound
# stand-in is provided, computing on the CPU what cupyx computes on the GPU:
#   cupyx.scipy.<module> (ndimage, special, signal, linalg, fft, sparse, stats, ...): SciPy's
#     module of that name, its array results as stand-in CuPy arrays. cugrade makes SciPy
#     importable (the interpreter's own, else installed into its cache) for a submission that
#     imports cupyx.scipy;
#   cupyx.scatter_add / scatter_max / scatter_min: numpy.add.at / maximum.at / minimum.at;
#   cupyx.empty_pinned, zeros_pinned, empty_like_pinned, zeros_like_pinned: host arrays;
#   cupyx.rsqrt: 1 / sqrt;
#   cupyx.profiler.time_range and cupyx.profiler.profile: context managers that do nothing.
# What has none raises cupy.StandInUnsupported, naming it and why: cupyx.jit kernels (a
# kernel needs a GPU, as cp.RawKernel's), cupyx.profiler.benchmark (it times the GPU), and any
# other name, when used.
import importlib
import importlib.abc
import importlib.machinery
import sys
import types

import cupy as _cp

if _cp._MODE == "record":
    class CupyxJitUnsupported(RuntimeError):
        """A cupyx.jit kernel: cugrade grades CuPy kernels written in CUDA C++ or CuPy's kernel
        language, not Python kernels compiled by cupyx.jit."""

    def _jit_unsupported(*args, **kwargs):
        def refuse(f=None):
            name = getattr(f, "__name__", "this kernel")
            raise CupyxJitUnsupported(
                f"`{name}` is a cupyx.jit kernel, which cugrade does not grade: write it as "
                "cp.RawKernel or in a cp.RawModule (CUDA C++ in a string), or as a "
                "cp.ElementwiseKernel or cp.ReductionKernel (docs/submissions.md#cupy-submissions)"
            )

        # `@cupyx.jit.rawkernel()` and `@cupyx.jit.rawkernel`.
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return refuse(args[0])
        return refuse

    class _Module(types.ModuleType):
        """A cupyx module: a package whose every attribute is accepted and ignored."""

        __path__ = []

        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            if self.__name__ == "cupyx.jit" and name in ("rawkernel", "kernel"):
                return _jit_unsupported
            return _cp._Anything()

    def _create(name):
        return _Module(name)

    def _missing(name):
        return _cp._Anything()

else:
    import numpy as _np

    __cugrade_stand_in__ = True

    class _NoStandIn(_cp.StandInUnsupported, ImportError):
        """A cupyx module that cannot be had without a GPU (it is an ImportError too, so that a
        pipeline's own `try: import ... except ImportError` still works)."""

    def _unsupported(what, why="it needs a GPU"):
        raise _cp.StandInUnsupported(
            f"{what}: {why}; without a GPU, cugrade stands in for cupyx.scipy (with SciPy) and a "
            "few cupyx functions only (grade on a GPU machine to run this code)"
        )

    class _Refused:
        """A cupyx name with no stand-in: any use says so."""

        def __init__(self, name, why="it needs a GPU"):
            self._name, self._why = name, why

        def __call__(self, *args, **kwargs):
            _unsupported(self._name, self._why)

        def __getattr__(self, attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            return _Refused(f"{self._name}.{attr}", self._why)

    class _Nothing:
        """A context manager (and decorator) that does nothing: profiler ranges."""

        def __init__(self, *args, **kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def __call__(self, f=None, *args, **kwargs):
            return f if callable(f) else self

    # --- cupyx functions ----------------------------------------------------------------------

    def _scatter(ufunc):
        def scatter(a, slices, value):
            ufunc.at(a, slices, value)

        return scatter

    scatter_add = _scatter(_np.add)
    scatter_max = _scatter(_np.maximum)
    scatter_min = _scatter(_np.minimum)

    def empty_pinned(shape, dtype=float, order="C"):
        return _np.empty(shape, dtype=dtype, order=order)

    def zeros_pinned(shape, dtype=float, order="C"):
        return _np.zeros(shape, dtype=dtype, order=order)

    def empty_like_pinned(a, dtype=None, order="K", subok=None, shape=None):
        return _np.empty_like(_np.asarray(a), dtype=dtype, order=order, shape=shape)

    def zeros_like_pinned(a, dtype=None, order="K", subok=None, shape=None):
        return _np.zeros_like(_np.asarray(a), dtype=dtype, order=order, shape=shape)

    def rsqrt(x, out=None):
        r = _cp.divide(1, _cp.sqrt(x))
        if out is not None:
            out[...] = r
            return out
        return r

    # --- cupyx.scipy: SciPy's modules, results wrapped as stand-in arrays -----------------------

    class _SciPy(types.ModuleType):
        """cupyx.scipy.X standing for scipy.X."""

        __path__ = []

        def __init__(self, name, target):
            super().__init__(name)
            self._target = target

        def __getattr__(self, attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            return _cp._lookup(self._target, attr)

    def _scipy_module(fullname):
        sub = fullname[len("cupyx.") :]  # scipy, scipy.ndimage, ...
        try:
            target = importlib.import_module(sub)
        except ImportError as e:
            raise _NoStandIn(
                f"{fullname}: without a GPU, cugrade stands in for it with {sub} (SciPy), which "
                f"this machine's Python cannot import ({e}); grade on a GPU machine, or install "
                "SciPy where cugrade runs"
            ) from None
        return _SciPy(fullname, target)

    class _Module(types.ModuleType):
        """A cupyx submodule without a stand-in (cupyx.jit, ...): its names are refused on use."""

        __path__ = []

        def __getattr__(self, attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            if self.__name__ == "cupyx.profiler" and attr in ("time_range", "profile"):
                return _Nothing
            if self.__name__ == "cupyx.jit" and attr == "rawkernel":
                return _rawkernel
            why = "a cupyx.jit kernel needs a GPU" if self.__name__.startswith("cupyx.jit") else (
                "it needs a GPU"
            )
            return _Refused(f"{self.__name__}.{attr}", why)

    def _rawkernel(*args, **kwargs):
        """`@cupyx.jit.rawkernel()` (and without parentheses): defined freely, like cp.RawKernel;
        launching it is refused."""

        def define(f):
            return _Refused(f"cupyx.jit kernel `{getattr(f, '__name__', '?')}`",
                            "a cupyx.jit kernel needs a GPU")

        if len(args) == 1 and callable(args[0]) and not kwargs:
            return define(args[0])
        return define

    def _create(name):
        if name == "cupyx.scipy" or name.startswith("cupyx.scipy."):
            return _scipy_module(name)
        return _Module(name)

    def _missing(name):
        return _Refused(f"cupyx.{name}", "cugrade's stand-in has no such function")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith("cupyx."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return _create(spec.name)

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Finder())
__path__ = []

_SUBMODULES = {"jit", "scipy", "profiler", "optimizing", "time", "lapack", "linalg", "signal",
               "distributed"}


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    if name in _SUBMODULES:  # `cupyx.scipy` after `import cupyx`, `from cupyx import jit`
        return importlib.import_module(f"cupyx.{name}")
    return _missing(name)
