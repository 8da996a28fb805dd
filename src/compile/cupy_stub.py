# cugrade's stand-in for the `cupy` package, used only to FIND a submission's kernels. It runs in
# the sandboxed compile worker, first on sys.path, with no GPU and no real CuPy: creating a
# `cp.RawKernel`, `cp.RawModule`, `cp.ElementwiseKernel` or `cp.ReductionKernel` records the
# definition (cugrade compiles it later, with NVRTC); array functions are NumPy's where NumPy
# can be imported; launching a kernel raises, as it would on a machine without a GPU.
import sys

_registry = []
_SRC = None  # set by the driver: the submission's folder


def _site():
    """(file, line) of the innermost frame of a student file that made this call."""
    f = sys._getframe(2)
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


def fuse(*args, **kwargs):
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda f: f


def memoize(*args, **kwargs):
    return fuse(*args, **kwargs)


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
