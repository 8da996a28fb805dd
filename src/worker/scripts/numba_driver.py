# cugrade's Numba compile driver. It runs inside the sandboxed compile worker (namespaces,
# Landlock, seccomp, rlimits, a deadline): importing a student's module runs the student's
# code. Its answer goes to a file, never to stdout, so that nothing the student prints can
# pass for it; a student who tampers with it only hands in other PTX, which is then graded.
# (prelude.py comes first: REQUEST, SRC, the helpers.)
ANSWER = sys.argv[2]
CUPY_STAND_IN = "record"  # a module importing cupy gets the stand-in that finds kernels
results = []


def answer(extra=None):
    body = {"results": results}
    if extra:
        body.update(extra)
    with open(ANSWER, "w", encoding="utf-8") as f:
        json.dump(body, f)


FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)')
AT_LINE = re.compile(r"at (\S+\.py) \((\d+)\)")


def numba_location(message):
    """The last `File "x.py", line N` (or `at x.py (N)`) a Numba message names."""
    found = (None, None)
    for m in list(FILE_LINE.finditer(message)) + list(AT_LINE.finditer(message)):
        name = rel(m.group(1)) or (m.group(1) if not os.path.isabs(m.group(1)) else None)
        if name and name.endswith(".py"):
            found = (name, int(m.group(2)))
    return found


def headline(message):
    """The line of a Numba error a student needs first."""
    skip = ("Failed in ", "During:", "File ", "There are ", "Resolution failure", " - Of which")
    lines = [line.strip() for line in message.splitlines()]
    for i, line in enumerate(lines):
        s = line.strip(">").strip()
        if s and not s.startswith(skip) and not s.startswith("^"):
            # "No implementation of function ... found for signature:" + ">>> setitem(...)"
            rest = [x for x in lines[i + 1 :] if x]
            if s.endswith(":") and rest and rest[0].startswith(">>>"):
                s = f"{s} {rest[0][3:].strip()}"
            return s[:300]
    return message.strip().splitlines()[0][:300] if message.strip() else "compilation failed"


NAME_ERROR = re.compile(r"name '(\w+)' is not defined")


def function_location(func, message):
    """Where in `func` the error is: the line using an undefined name, else the `def`."""
    import inspect

    try:
        lines, first = inspect.getsourcelines(func)
        name = rel(inspect.getsourcefile(func))
    except (OSError, TypeError):
        return (None, None)
    undefined = NAME_ERROR.search(message)
    if undefined:
        word = re.compile(r"\b%s\b" % re.escape(undefined.group(1)))
        for i, text in enumerate(lines):
            if i > 0 and word.search(text.split("#")[0]):
                return (name, first + i)
    for i, text in enumerate(lines):
        if text.lstrip().startswith("def "):
            return (name, first + i)
    return (name, first)


def typing_location(tb):
    """The innermost Numba IR location (`loc.filename`, `loc.line`) in a student file that
    the compiler's frames hold: typing errors often do not say where they are."""
    found = (None, None)
    while tb is not None:
        local = tb.tb_frame.f_locals
        for key in ("loc", "inst", "stmt", "expr"):
            v = local.get(key)
            loc = v if key == "loc" else getattr(v, "loc", None)
            name = rel(getattr(loc, "filename", None) or "")
            line = getattr(loc, "line", None)
            if name and isinstance(line, int) and line > 0:
                found = (name, line)
                break
        tb = tb.tb_next
    return found


def failure(kernel, exc, tb, kind, func=None):
    message = scrub(str(exc), ansi=True)
    name, line = numba_location(message)
    if name is None and kind != "import":
        name, line = typing_location(tb)
    if name is None and func is not None:
        name, line = function_location(func, message)
    if name is None:
        name, line = student_frame(tb)
    if isinstance(exc, SyntaxError) and exc.filename:
        name, line = rel(exc.filename) or name, exc.lineno or line
        message = f"SyntaxError: {exc.msg}"
    head = headline(message)
    if kind == "import" and not isinstance(exc, SyntaxError):
        head = f"{type(exc).__name__}: {head}"
    details = scrub("".join(traceback.format_exception(type(exc), exc, tb)[-30:]), ansi=True)
    if kind != "import":
        details = message
    return {
        "kernel": kernel,
        "ok": False,
        "missing": False,
        "file": name,
        "line": line,
        "message": head,
        "details": details[-8000:],
        "signature": 0,
    }


import site  # noqa: E402

# The wheels' directory is a site dir: numba-cuda's redirector is a `.pth` file. Python runs
# with -S, so the host's site-packages are not on sys.path at all (a system NumPy 2.5 breaks
# numba-cuda 0.30.4, and a host's sitecustomize may live outside the worker's view); the
# wheels' entries go first anyway.
_before = list(sys.path)
site.addsitedir(REQUEST["site"])
sys.path[:] = [p for p in sys.path if p not in _before] + _before
try:
    from numba import cuda, types  # noqa: E402
except BaseException as e:  # the toolchain itself is broken: say so, not the student
    answer({"toolchain_error": f"{type(e).__name__}: {e}"})
    sys.exit(0)


class _Target:
    """The device Numba asks about while compiling device functions: there is no driver in
    the compile worker (and no GPU on many grading machines), only the target's capability."""

    compute_capability = tuple(REQUEST["cc"])


def _target_device():
    return _Target()


import numba.cuda.compiler as _compiler  # noqa: E402
import numba.cuda.dispatcher as _dispatcher  # noqa: E402

_dispatcher.get_current_device = _target_device
_compiler.get_current_device = _target_device


# `@cuda.jit("void(float32[:], ...)")` compiles when the decorator runs, which needs a driver.
# cugrade compiles with the contract's signature anyway, so a decorator's signature is dropped
# and the kernel stays lazy.
_eager_jit = cuda.jit


def _lazy_jit(func_or_sig=None, *args, **kwargs):
    import inspect

    if func_or_sig is not None and not inspect.isfunction(func_or_sig):
        return _eager_jit(*args, **kwargs)
    return _eager_jit(func_or_sig, *args, **kwargs)


cuda.jit = _lazy_jit


def _probe(a):
    a[0] = 1.0


# A kernel that cannot fail: if it does not compile, the toolchain is broken (a NumPy that
# this Numba does not support, a missing NVVM), and no student kernel is to blame for it.
try:
    cuda.compile_ptx(_probe, (types.float32[::1],), cc=tuple(REQUEST["cc"]))
except BaseException as e:
    answer({"toolchain_error": f"a trivial kernel does not compile: {type(e).__name__}: {e}"})
    sys.exit(0)

# Only now may the student's files be found: a `numba.py` or `math.py` of theirs must not
# replace what the compiler itself imports.
sys.path.insert(0, SRC)
os.chdir(SRC)


def mark(path, text=""):
    """Tell the worker how far the driver got (it gives the student's imports a budget)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


mark(REQUEST["ready"])

modules = []  # (file, namespace, import failure or None)
for path in REQUEST["files"]:
    mod_name = module_name(path)
    import importlib.util

    mark(REQUEST["importing"], path)
    spec = importlib.util.spec_from_file_location(mod_name, os.path.join(SRC, path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
        modules.append((path, vars(module), None))
    except BaseException as e:  # keep what was defined before the failure
        modules.append((path, vars(module), (e, e.__traceback__)))


mark(REQUEST["imported"])


def is_kernel(obj):
    return hasattr(obj, "py_func") and hasattr(obj, "targetoptions")


cc = tuple(REQUEST["cc"])
for k in REQUEST["kernels"]:
    name = k["name"]
    found = [(p, ns[name]) for p, ns, _ in modules if is_kernel(ns.get(name))]
    if not found:
        broken = [(p, err) for p, ns, err in modules if err is not None]
        if broken:
            e, tb = broken[0][1]
            results.append(failure(name, e, tb, "import"))
        else:
            plain = [p for p, ns, _ in modules if callable(ns.get(name))]
            results.append(
                {
                    "kernel": name,
                    "ok": False,
                    "missing": True,
                    "file": plain[0] if plain else None,
                    "line": None,
                    "message": (
                        f"`{name}` in {plain[0]} is not a `@cuda.jit` kernel"
                        if plain
                        else f"no `@cuda.jit` function named `{name}`"
                    ),
                    "details": "",
                    "signature": 0,
                }
            )
        continue
    path, dispatcher = found[0]
    options = getattr(dispatcher, "targetoptions", {}) or {}
    wanted = k.get("params") or []
    try:
        import inspect

        have = list(inspect.signature(dispatcher.py_func).parameters)
    except (TypeError, ValueError):
        have = wanted
    if wanted and len(have) != len(wanted):
        where = function_location(dispatcher.py_func, "")
        results.append(
            {
                "kernel": name,
                "ok": False,
                "missing": False,
                "file": where[0] or path,
                "line": where[1],
                "message": f"`{name}` takes {len(have)} parameters ({', '.join(have)}); "
                f"the assignment passes {len(wanted)}: {', '.join(wanted)}",
                "details": "",
                "signature": 0,
            }
        )
        continue
    first_failure = None
    done = False
    for i, sig_text in enumerate(k["signatures"]):
        try:
            sig = eval(sig_text, {"__builtins__": {}}, vars(types))
            ptx, _ = cuda.compile_ptx(
                dispatcher.py_func,
                sig,
                cc=cc,
                lineinfo=True,
                fastmath=bool(options.get("fastmath", False)),
            )
        except BaseException as e:
            f = failure(name, e, e.__traceback__, "compile", dispatcher.py_func)
            f["signature"] = i
            # A failure that is about array dimensions is the wrong guess of the layout;
            # prefer another attempt's message.
            dims = re.search(r"getitem|setitem|\d+d, [CAF]\)|UniTuple", f["details"]) is not None
            if first_failure is None or (first_failure[1] and not dims):
                first_failure = (f, dims)
            continue
        results.append(
            {
                "kernel": name,
                "ok": True,
                "missing": False,
                "file": path,
                "line": None,
                "message": f"compiled with Numba as {sig_text}",
                "details": "",
                "signature": i,
                "ptx": ptx,
            }
        )
        done = True
        break
    if not done:
        results.append(first_failure[0])
answer()
