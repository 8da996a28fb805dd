# cugrade's Python prelude: what every script cugrade runs next to a submission's Python shares.
# The Rust side (src/worker/scripts.rs) puts it at the top of cupy_driver.py, numba_driver.py and
# python_harness.py, each run as one file by a sandboxed worker's interpreter (`python -I FILE
# REQUEST ...`). It reads the request (argv[1], JSON) and names the submission's folder; its
# helpers say where in the submission something went wrong, as the student knows the files.
import json
import os
import re
import sys
import traceback

REQUEST = json.load(open(sys.argv[1], encoding="utf-8"))
SRC = os.path.realpath(REQUEST["src"])
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def rel(path):
    """A path as the student knows it: relative to the submission (None outside it)."""
    try:
        real = os.path.realpath(path)
    except (TypeError, ValueError):
        return None
    if not real.startswith(SRC + os.sep):
        return None
    return real[len(SRC) + 1 :]


def scrub(text, ansi=False):
    """`text` without the submission's folder (and, with `ansi`, without terminal colours)."""
    if ansi:
        text = ANSI.sub("", text)
    return text.replace(SRC + os.sep, "").replace(SRC, ".")


def student_frame(tb):
    """(file, line) of the innermost traceback frame in a student file, else (None, None)."""
    where = (None, None)
    for frame in traceback.extract_tb(tb):
        name = rel(frame.filename)
        if name:
            where = (name, frame.lineno)
    return where


def traceback_text(exc, frames):
    """`exc` as Python prints it, with the traceback `frames` (the ones the student reads)."""
    text = "".join(traceback.format_exception_only(type(exc), exc))
    if frames:
        text = "Traceback (most recent call last):\n" + "".join(traceback.format_list(frames)) + text
    return text


def module_name(path):
    """The name a submission's file `path` is imported as: one already loaded (numba, math,
    ...) gets a prefix, so that the student's file does not replace it."""
    name = path[:-3].replace("/", ".")
    if name.endswith(".__init__"):
        name = name[: -len(".__init__")]
    if name in sys.modules:
        name = "_cugrade_student_" + name
    return name
