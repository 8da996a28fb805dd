# cugrade's stand-in for the `cupyx` package, beside its `cupy` stand-in (cupy_stub.py), used
# only to FIND a submission's kernels in the sandboxed compile worker. Every `cupyx` module
# imports (`import cupyx.scipy.ndimage`, `from cupyx.scipy import special`), and what it holds
# is accepted and ignored while definitions are read, as `cp.cuda` is: nothing here runs on
# data. A kernel written with `cupyx.jit` is the one thing that cannot be graded: decorating
# one raises, saying so at the student's line.
import importlib.abc
import importlib.machinery
import sys
import types

import cupy as _cupy


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
        return _cupy._Anything()


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith("cupyx."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return _Module(spec.name)

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Finder())
__path__ = []


_SUBMODULES = {"jit", "scipy", "profiler", "optimizing", "time", "lapack", "linalg", "signal",
               "distributed"}


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    if name in _SUBMODULES:  # `from cupyx import jit`
        import importlib

        return importlib.import_module(f"cupyx.{name}")
    return _cupy._Anything()
