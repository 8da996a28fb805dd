# Checks the preprocess lab's examples (submissions-example/preprocess/*/preprocess.py) against
# the NumPy reference (reference-kernels/preprocess.py) with cugrade's NumPy stand-in for CuPy
# (src/worker/scripts/cupy_stand_in.py in its NumPy use) installed as `cupy` first on sys.path,
# the way the worker runs them without a GPU. Each example gets a fresh table (seeded) per call: every case size in
# turn, then every size again with new values (a result cached across calls fails the
# second round). Prints, per example and call, the max abs and rel difference of each
# feature column, and compares the verdict with the emulator status of its expected.yaml
# (skipped = correct, fail = wrong).
# Run: PYTHONPATH=<dir with numpy> python3 ci/check-preprocess-examples.py [EXAMPLE...]
# Exit 0 when every example's verdict matches its expected.yaml.
import importlib.util
import os
import shutil
import sys
import tempfile

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
EXAMPLES = os.path.join(ROOT, "submissions-example", "preprocess")
SIZES = (1, 2, 1000, 100003)
ATOL = 1e-5  # this script's bar, not the rubric's: see rubrics/preprocess.yaml
RTOL = 1e-5


def make_table(n, seed, groups=1000, categories=4):
    """The lab's table: uniform amounts, ages, groups and categories, C-contiguous."""
    rng = np.random.default_rng(seed)
    return {
        "amount": (rng.random(n, dtype=np.float32) * np.float32(10000)).astype(np.float32),
        "age": (rng.random(n, dtype=np.float32) * np.float32(120)).astype(np.float32),
        "group": rng.integers(0, groups, n, dtype=np.int32),
        "category": rng.integers(0, categories, n, dtype=np.int32),
        "groups": groups,
        "categories": categories,
    }


def copy_table(t):
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in t.items()}


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def compare(got, ref):
    """(problem or None, [(max abs, max rel) per column]); OR-combined abs/rel bar."""
    if type(got) is not np.ndarray and hasattr(got, "get"):
        got = got.get()  # a (stand-in) CuPy array: download it, as the grader does
    if not isinstance(got, np.ndarray):
        return f"returned {type(got).__name__}, not an array", []
    if got.shape != ref.shape:
        return f"shape {got.shape}, expected {ref.shape}", []
    cols = []
    for j in range(ref.shape[1]):
        g64, r64 = got[:, j].astype(np.float64), ref[:, j].astype(np.float64)
        err = np.abs(g64 - r64)
        nz = r64 != 0  # rel over the nonzero reference values; zeros are judged by abs
        rel = np.where(nz, err / np.where(nz, np.abs(r64), 1), 0.0)
        cols.append((float(err.max(initial=0)), float(rel.max(initial=0))))
        if np.any(~((err <= ATOL) | (rel <= RTOL))) or np.isnan(g64).any():
            bad = f"column {j} differs (max abs {cols[-1][0]:.3g})"
            break
    else:
        bad = None
    if got.dtype != np.float32:
        bad = f"dtype {got.dtype}, expected float32" + (f"; {bad}" if bad else "")
    return bad, cols


def expected_emu(folder):
    with open(os.path.join(folder, "expected.yaml")) as f:
        for line in f:
            s = line.strip()
            if s.startswith("preprocess:"):
                return s.split(":", 1)[1].strip()  # the first one is under `milestones:`
    return None


def main(names):
    tmp = tempfile.mkdtemp(prefix="cugrade-preprocess-check-")
    os.mkdir(os.path.join(tmp, "cupy"))
    shutil.copy(os.path.join(ROOT, "src", "worker", "scripts", "cupy_stand_in.py"),
                os.path.join(tmp, "cupy", "__init__.py"))
    sys.path.insert(0, tmp)
    reference = load(os.path.join(ROOT, "reference-kernels", "preprocess.py"), "reference")
    names = names or sorted(os.listdir(EXAMPLES))
    mismatches = 0
    for name in names:
        folder = os.path.join(EXAMPLES, name)
        mod = load(os.path.join(folder, "preprocess.py"), "example_" + name)
        wrong = []
        for rnd in (1, 2):
            for n in SIZES:
                table = make_table(n, seed=1000 * rnd + n)
                ref = reference.preprocess(copy_table(table))
                try:
                    bad, cols = compare(mod.preprocess(copy_table(table)), ref)
                except Exception as e:  # noqa: BLE001 (a student's exception is a verdict)
                    bad, cols = f"raised {type(e).__name__}: {e}", []
                diffs = " ".join(f"{a:.1e}/{r:.1e}" for a, r in cols[:4])
                if len(cols) > 4:
                    diffs += f" one-hot {max(a for a, _ in cols[4:]):.0e}"
                print(f"{name:16} call {rnd} n={n:<6} {'ok   ' if bad is None else 'WRONG'} "
                      f"abs/rel col 0-3: {diffs or '-'}{'  ' + bad if bad else ''}")
                if bad:
                    wrong.append(bad)
        verdict = "fail" if wrong else "skipped"
        want = expected_emu(folder)
        mismatches += verdict != want
        print(f"{name:16} => emulator verdict {verdict}, expected.yaml {want}"
              f"{'' if verdict == want else '   MISMATCH'}\n")
    shutil.rmtree(tmp)
    print("all examples as expected" if not mismatches else f"{mismatches} mismatch(es)")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
