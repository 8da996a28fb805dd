# cugrade's harness for Python function labs (docs/labs/preprocess.md): it imports a
# submission's modules (or the lab's NumPy reference), finds the lab's function, and calls it on
# the tables the grader sends, answering with the returned array's bytes.
#
# It runs as the sandboxed worker process itself (the Rust worker confines itself, then
# exec()s this), so the student's code shares this interpreter: nothing here is trusted. The
# grader times each call from its own process (the request leaves, the last byte of the answer
# arrives), generates every table afresh, and checks every answer; whatever this file or the
# student's code does inside the process can only make a call slower or its answer wrong.
#
# Channel: fd 0 carries the grader's frames, the original fd 1 the answers; fd 1 then points
# at fd 2 (captured), so that what the student prints never reaches the channel. A frame is
# b"CGW2", u32 header length, a MessagePack header, u32 blob count, per blob u64 length and
# bytes (src/worker/protocol.rs). The header is {"Python": {"json": TEXT}} both ways.
# (prelude.py comes first: REQUEST, SRC, the helpers.)
import struct

_OUT = os.fdopen(os.dup(1), "wb", buffering=0)
os.dup2(2, 1)
_IN = os.fdopen(os.dup(0), "rb", buffering=0)
_null = os.open(os.devnull, os.O_RDONLY)
os.dup2(_null, 0)
os.close(_null)

MAX_BLOBS = 64


def _read_exact(n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = _IN.readinto(view[got:])
        if not k:
            raise EOFError
        got += k
    return buf


def _str(s):
    b = s.encode("utf-8")
    n = len(b)
    if n < 32:
        return bytes([0xA0 | n]) + b
    if n < 256:
        return b"\xd9" + bytes([n]) + b
    if n < 65536:
        return b"\xda" + struct.pack(">H", n) + b
    return b"\xdb" + struct.pack(">I", n) + b


def _read_str(buf, i):
    t = buf[i]
    if 0xA0 <= t <= 0xBF:
        n, i = t & 0x1F, i + 1
    elif t == 0xD9:
        n, i = buf[i + 1], i + 2
    elif t == 0xDA:
        n, i = struct.unpack(">H", buf[i + 1 : i + 3])[0], i + 3
    elif t == 0xDB:
        n, i = struct.unpack(">I", buf[i + 1 : i + 5])[0], i + 5
    else:
        raise ValueError("expected a string")
    return buf[i : i + n].decode("utf-8"), i + n


def receive():
    """The next request: (dict, [bytes]); None when the grader closed the channel."""
    try:
        magic = _read_exact(4)
    except EOFError:
        return None
    if bytes(magic) != b"CGW2":
        raise ValueError("bad frame")
    (hlen,) = struct.unpack("<I", _read_exact(4))
    header = bytes(_read_exact(hlen))
    # {"Python": {"json": TEXT}}: two one-entry maps around the text.
    if header[0] != 0x81:
        raise ValueError("unexpected request")
    name, i = _read_str(header, 1)
    if name != "Python" or header[i] != 0x81:
        raise ValueError("unexpected request " + name)
    key, i = _read_str(header, i + 1)
    text, _ = _read_str(header, i)
    (count,) = struct.unpack("<I", _read_exact(4))
    if count > MAX_BLOBS:
        raise ValueError("too many blobs")
    blobs = []
    for _ in range(count):
        (n,) = struct.unpack("<Q", _read_exact(8))
        blobs.append(_read_exact(n))
    return json.loads(text), blobs


def send(answer, blobs=()):
    header = b"\x81" + _str("Python") + b"\x81" + _str("json") + _str(json.dumps(answer))
    _OUT.write(b"CGW2" + struct.pack("<I", len(header)) + header)
    _OUT.write(struct.pack("<I", len(blobs)))
    for b in blobs:
        m = memoryview(b).cast("B")
        _OUT.write(struct.pack("<Q", m.nbytes))
        # A pipe takes a large write in pieces; write() may return early.
        off = 0
        while off < m.nbytes:
            off += _OUT.write(m[off:])


_HARNESS = os.path.realpath(__file__)


def ours(filename):
    """Whether a traceback's frame is in cugrade's own code, not the student's or a library's."""
    if filename.startswith("<frozen "):
        return True
    try:
        real = os.path.realpath(filename)
    except (TypeError, ValueError):
        return False
    stand_in = REQUEST.get("stand_in")
    return real == _HARNESS or bool(stand_in and real.startswith(os.path.realpath(stand_in) + os.sep))


def failure(exc, kind="exception"):
    """What went wrong, at the submission's innermost line."""
    tb = traceback.extract_tb(exc.__traceback__)
    if isinstance(exc, SyntaxError) and rel(exc.filename or ""):
        at_file, at_line = rel(exc.filename), exc.lineno
    else:
        at_file, at_line = student_frame(exc.__traceback__)
    message = scrub("".join(traceback.format_exception_only(type(exc), exc)).strip())
    # This harness, the stand-ins and Python's import machinery are cugrade's: the student
    # reads the frames of their own files and of the libraries they called.
    details = scrub(traceback_text(exc, [f for f in tb if not ours(f.filename)]))
    # A message of 50 MB would not fit a frame; the grader caps what it keeps anyway (this is
    # the student's interpreter: nothing here is trusted), so send no more than it keeps.
    if len(message) > 4000:
        message = message[:4000] + "\n[truncated: %d more characters]" % (len(message) - 4000)
    return {
        "kind": kind,
        "message": message,
        "file": at_file,
        "line": at_line,
        "details": details[-8000:],
    }


# What the submission imports as `cupy`: the GPU's own CuPy, or NumPy standing in for it.
if REQUEST.get("stand_in"):
    sys.path.insert(0, REQUEST["stand_in"])
for site in REQUEST.get("sites", []):
    sys.path.append(site)

try:
    import numpy as np
except Exception as e:  # noqa: BLE001 - the machine's fault, said as such
    send({"ready": False, "machine": True, "error": failure(e)})
    sys.exit(0)

cp = None
backend = "numpy " + np.__version__
if REQUEST.get("cupy"):
    try:
        import cupy as cp

        backend = "cupy " + getattr(cp, "__version__", "?")
        if getattr(cp, "__cugrade_stand_in__", False):
            backend = "NumPy " + np.__version__ + " standing in for CuPy"
    except Exception as e:  # noqa: BLE001
        send({"ready": False, "machine": True, "error": failure(e)})
        sys.exit(0)

# Only now may the student's files be found: a `numpy.py` or `cupy.py` of theirs must not
# replace the libraries above (their `import numpy` gets the one already loaded).
sys.path.insert(0, SRC)

function = None
errors = []
for module in REQUEST["modules"]:
    try:
        mod = __import__(module)
    except BaseException as e:  # noqa: BLE001 - the student's module failed to import
        errors.append(failure(e, "import"))
        continue
    f = getattr(mod, REQUEST["function"], None)
    if callable(f):
        function = f
        break
if function is None:
    send({"ready": False, "errors": errors})
    sys.exit(0)

send({"ready": True, "backend": backend})


def to_host(out):
    """The returned value as a host array: a CuPy array is copied from the device here, inside
    the grader's clock. Anything else than an array is refused."""
    if cp is not None and isinstance(out, getattr(cp, "ndarray", ())) and hasattr(out, "get"):
        out = out.get()
    if type(out) is not np.ndarray and not isinstance(out, np.ndarray):
        raise TypeError(
            "%s returned %s, not an array: return the features as a CuPy or NumPy array"
            % (REQUEST["function"], type(out).__name__)
        )
    return np.ascontiguousarray(out)


while True:
    got = receive()
    if got is None:
        break
    req, blobs = got
    if req.get("exit"):
        break
    if req.get("null"):
        # The harness alone: the table in, an array of the result's size out, no function.
        # The grader times it in its trusted reference worker: what moving the data costs.
        out = np.zeros(req["null"]["shape"], dtype=np.dtype(req["null"]["dtype"]))
        send({"dtype": out.dtype.str, "shape": list(out.shape)}, [out])
        continue
    table = {}
    for col, blob in zip(req["columns"], blobs):
        # A writable host array: the student may transform it in place.
        a = np.frombuffer(blob, dtype=np.dtype(col["dtype"]))
        table[col["name"]] = a.reshape(col["shape"])
    for name, value in req.get("scalars", {}).items():
        table[name] = value
    if req.get("cpu") is not None:
        # A course's CPU implementation (trusted code, a speed baseline): the kernel's
        # parameters as keyword arguments, outputs written in place, timed here so that
        # moving the arrays through the channel is not part of its time.
        import time

        try:
            t0 = time.perf_counter()
            function(**table)
            ms = (time.perf_counter() - t0) * 1e3
            outs = [np.ascontiguousarray(table[name]) for name in req["cpu"]]
        except BaseException as e:  # noqa: BLE001
            send({"error": failure(e)})
            continue
        send({"ms": ms}, outs)
        continue
    try:
        out = to_host(function(table))
    except BaseException as e:  # noqa: BLE001
        # The stand-in's own class (a student's class of that name is not it). The grader
        # decides on its own whether to believe this: see pipeline::function's Side.
        unsupported = getattr(cp, "StandInUnsupported", None) if cp is not None else None
        kind = "unsupported" if unsupported and isinstance(e, unsupported) else "exception"
        if isinstance(e, MemoryError):
            kind = "memory"
        send({"error": failure(e, kind)})
        continue
    send({"dtype": out.dtype.str, "shape": list(out.shape)}, [out])
