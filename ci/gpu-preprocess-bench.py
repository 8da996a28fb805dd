# The preprocess lab's examples with REAL CuPy on a GPU machine, without cugrade: checks each
# example against the NumPy reference on the correctness sizes, then times it end to end
# (fresh table per call; the call, the download of its result and a device synchronisation
# inside the clock) against the reference timed the same way in the same run, at n = 2^20
# and 2^22. It shows what the lab's `gpu:` verdicts and its 10x bar mean on this machine, and
# which performance size to choose. The clock is bound before any example is imported, so
# an example that patches time.perf_counter (patches_timer) cannot touch it.
# Usage: python3 ci/gpu-preprocess-bench.py OUTDIR [N...]   (needs CuPy and NumPy; no network;
# N: performance sizes instead of 2^20 and 2^22)
import importlib
import importlib.util
import os
import statistics
import sys
from time import perf_counter as clock  # bound now: later patches of `time` cannot reach it

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "ci"))
make_table = importlib.import_module("check-preprocess-examples").make_table
EXAMPLES = os.path.join(ROOT, "submissions-example", "preprocess")
PERF_SIZES = (1 << 20, 1 << 22)
CALLS = 5


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def download(r, cp):
    if isinstance(r, cp.ndarray):
        r = r.get()
    cp.cuda.Device().synchronize()
    return r


def close(got, ref):
    """This script's bar (the rubric's is in rubrics/preprocess.yaml): columns 0 and 2 abs
    1e-4, column 1 abs 1e-6, column 3 within half a rank step, the one-hot exact."""
    if not isinstance(got, np.ndarray) or got.dtype != np.float32 or got.shape != ref.shape:
        return f"{type(got).__name__} {getattr(got, 'dtype', '')} {getattr(got, 'shape', '')}"
    n = ref.shape[0]
    tol = [1e-4, 1e-6, 1e-4, 0.5 / max(n - 1, 1)] + [0.0] * (ref.shape[1] - 4)
    for j, t in enumerate(tol):
        err = float(np.abs(got[:, j].astype(np.float64) - ref[:, j]).max(initial=0))
        if not err <= t:
            return f"column {j} max abs {err:.3g} > {t:.3g}"
    return None


def timed(f, n, seed0, cp):
    times, problems = [], []
    for i in range(CALLS + 1):  # the first call warms up (imports, kernel compilation)
        table = make_table(n, seed=seed0 + i)
        start = clock()
        out = download(f(table), cp)
        t = clock() - start
        if i:
            times.append(t)
            ref = REF(make_table(n, seed=seed0 + i))
            bad = close(out, ref)
            if bad:
                problems.append(bad)
    return statistics.median(times), problems


def main(outdir):
    global REF
    import cupy as cp

    os.makedirs(outdir, exist_ok=True)
    log = open(os.path.join(outdir, "gpu-preprocess.log"), "w")

    def say(s):
        print(s)
        log.write(s + "\n")
        log.flush()

    try:
        gpu = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception as e:  # noqa: BLE001 (cugrade's NumPy stand-in has no device)
        gpu = f"no GPU name ({type(e).__name__})"
    say(f"cupy {cp.__version__}, numpy {np.__version__}, {gpu}, {os.cpu_count()} CPUs")
    REF = load(os.path.join(ROOT, "reference-kernels", "preprocess.py"), "reference").preprocess
    base = {n: timed(REF, n, 50, cp)[0] for n in PERF_SIZES}
    for n in PERF_SIZES:
        say(f"reference n={n}: median {base[n] * 1e3:.2f} ms over {CALLS} calls")
    for name in sorted(os.listdir(EXAMPLES)):
        try:
            f = load(os.path.join(EXAMPLES, name, "preprocess.py"), "ex_" + name).preprocess
            wrong = []
            for rnd in (1, 2):
                for n in (1, 2, 1000, 100003):
                    t = make_table(n, seed=1000 * rnd + n)
                    bad = close(download(f(make_table(n, seed=1000 * rnd + n)), cp), REF(t))
                    if bad:
                        wrong.append(f"n={n}: {bad}")
            say(f"{name}: correctness {'ok' if not wrong else 'WRONG ' + wrong[0]}")
            for n in PERF_SIZES:
                med, problems = timed(f, n, 70, cp)
                say(f"{name}: n={n}: median {med * 1e3:.2f} ms, speedup "
                    f"{base[n] / med:.1f}x{'  timed outputs WRONG: ' + problems[0] if problems else ''}")
        except Exception as e:  # noqa: BLE001
            say(f"{name}: raised {type(e).__name__}: {str(e)[:200]}")
    log.close()


if __name__ == "__main__":
    if len(sys.argv) > 2:
        PERF_SIZES = tuple(int(a) for a in sys.argv[2:])
    main(sys.argv[1] if len(sys.argv) > 1 else "gpu-preprocess-out")
