# cugrade's CuPy driver: imports a submission's CuPy modules with cugrade's `cupy` stand-in
# first on sys.path and reports every kernel definition (RawKernel, RawModule,
# ElementwiseKernel, ReductionKernel) with the Python line that holds each source string. It
# runs inside the sandboxed compile worker (namespaces, Landlock, seccomp, rlimits, a
# deadline): importing a module runs the student's code. Its answer goes to a file, never to
# stdout; a student who tampers with it only hands in other kernel source, which is then
# compiled in the same sandbox and graded. (prelude.py comes first: REQUEST, SRC, the helpers.)
import ast

ANSWER = sys.argv[2]
CUPY_STAND_IN = "record"  # the stand-in's use: find the kernels (cupy_stand_in.py)

sys.path.insert(0, REQUEST["stub"])
if REQUEST.get("numpy_site"):
    sys.path.append(REQUEST["numpy_site"])
import cupy as _stub  # noqa: E402  (the stand-in)

_stub._SRC = SRC + os.sep


def content_column(lines, node):
    """The 1-based column (in characters) where a string literal's value starts on its first
    line (after the prefix and the opening quote), or None. Compiler columns in the value's
    first line are right from there on up to the first escape sequence or implicit
    concatenation (rare in kernel code); the later lines of a triple-quoted string start at
    column 1 anyway."""
    try:
        line = lines[node.lineno - 1]
    except IndexError:
        return None
    # ast counts UTF-8 bytes; compilers count characters.
    start = len(line.encode("utf-8")[: node.col_offset].decode("utf-8", "replace"))
    rest = line[start:]
    prefix = len(rest) - len(rest.lstrip("rRbBuUfF"))
    quote = rest[prefix:]
    for q in ('"""', "'''", '"', "'"):
        if quote.startswith(q):
            col = start + prefix + len(q)
            break
    else:
        return None
    return col + 1


# Every string literal of every file: (file, line of the opening quote, value, text, column of
# the value's first character on that line or None).
literals = []
for path in REQUEST["files"]:
    try:
        text = open(os.path.join(SRC, path), encoding="utf-8", errors="replace").read()
        tree = ast.parse(text)
    except (SyntaxError, ValueError, OSError):
        continue
    lines = text.splitlines()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            literals.append((path, node.lineno, node.value, text, content_column(lines, node)))


def locate(value, fallback):
    """Where a source string is: the literal that is it, else the literal it starts with, else
    the line holding its first non-blank line; `exact` says whether line 1 of the string is
    that line."""
    if not value:
        return {"file": fallback[0], "line": fallback[1], "exact": False}
    # The literal nearest the definition: `'x'` may be written more than once.
    near = sorted(literals, key=lambda x: (x[0] != fallback[0], abs(x[1] - (fallback[1] or 0))))
    for path, line, lit, _, col in near:
        if lit == value:
            return {"file": path, "line": line, "exact": True, "col": col}
    for path, line, lit, _, col in near:
        if len(lit) > 16 and value.startswith(lit):
            return {"file": path, "line": line, "exact": True, "col": col}
    first = next((x.strip() for x in value.splitlines() if x.strip()), "")
    skip = value.splitlines().index(next(x for x in value.splitlines() if x.strip())) if first else 0
    if first:
        for path in REQUEST["files"]:
            try:
                lines = open(os.path.join(SRC, path), encoding="utf-8", errors="replace").read().splitlines()
            except OSError:
                continue
            for i, text in enumerate(lines):
                if first in text:
                    return {"file": path, "line": i + 1 - skip, "exact": False}
    return {"file": fallback[0], "line": fallback[1], "exact": False}


def student_traceback(exc, tb):
    """The traceback through the submission's own files: this driver, the stand-ins and
    Python's import machinery are cugrade's, not the student's to read."""
    frames = [
        f for f in traceback.extract_tb(tb) if not f.filename.startswith("<") and rel(f.filename)
    ][-30:]
    return traceback_text(exc, frames)


def failure(path, exc, tb):
    where = student_frame(tb)
    if where[0] is None:
        where = (path, None)
    message = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SyntaxError) and exc.filename:
        where = (rel(exc.filename) or path, exc.lineno)
        message = f"SyntaxError: {exc.msg}"
    details = scrub(student_traceback(exc, tb))
    return {
        "file": where[0],
        "line": where[1],
        "message": scrub(message)[:300],
        "details": details[-8000:],
        "no_gpu": isinstance(exc, _stub._NoGpu),
    }


sys.path.insert(1, SRC)
os.chdir(SRC)
modules = []
errors = []
import importlib.util  # noqa: E402

for path in REQUEST["entries"]:
    mod_name = module_name(path)
    spec = importlib.util.spec_from_file_location(mod_name, os.path.join(SRC, path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as e:  # keep what was defined before the failure
        errors.append(failure(path, e, e.__traceback__))
    modules.append((path, vars(module)))

definitions = []
for obj in _stub._registry:
    d = dict(obj._cugrade)
    d["file"] = rel(d["file"]) if d["file"] else None
    d["variables"] = sorted(
        {k for _, ns in modules for k, v in list(ns.items()) if v is obj}
        | {
            k
            for _, ns in modules
            for k, v in list(ns.items())
            if isinstance(v, _stub._Function) and v.module is obj
        }
    )
    if d["kind"] == "raw_module":
        d["aliases"] = {
            k: v.name
            for _, ns in modules
            for k, v in list(ns.items())
            if isinstance(v, _stub._Function) and v.module is obj
        }
    at = (d["file"], d["line"])
    for key in ("code", "operation", "map_expr", "reduce_expr", "post_map_expr", "preamble",
                "loop_prep", "after_loop"):
        if d.get(key):
            d[key + "_at"] = locate(d[key], at)
    definitions.append(d)

with open(ANSWER, "w", encoding="utf-8") as f:
    json.dump({"definitions": definitions, "errors": errors}, f)
