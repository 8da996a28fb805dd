# Tolerance study for the preprocess lab: how far honest implementations land from the float32
# NumPy reference (reference-kernels/preprocess.py), per feature column, so that the rubric's
# tolerance admits them with a margin and still fails the classic bugs.
# Variants: (a) everything in float64, cast to float32 at the end; (b) mean and std summed
# sequentially (a running sum, the worst order) and (c) in blocks of 256 then across blocks
# (a GPU's tree); (d) group sums in float32, sequentially (float32 atomics); (e) the z-score
# as d * (1/std) and log1p as log(1 + x) (common GPU idioms).
# Run: PYTHONPATH=<dir with numpy> python3 ci/preprocess-tolerance.py [N...]
import importlib.util
import os
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
spec = importlib.util.spec_from_file_location(
    "reference", os.path.join(ROOT, "reference-kernels", "preprocess.py"))
reference = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reference)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
make_table = importlib.import_module("check-preprocess-examples").make_table

F = np.float32


def seq_sum(x):
    return np.cumsum(x, dtype=F)[-1]  # left to right, float32: the worst common order


def block_sum(x, b=256):
    pad = (-len(x)) % b
    blocks = np.concatenate([x, np.zeros(pad, F)]).reshape(-1, b)
    acc = blocks[:, 0].copy()
    for j in range(1, b):  # each block summed sequentially (a thread's loop), then the blocks
        acc += blocks[:, j]
    return seq_sum(acc) if len(acc) > 1 else acc[0]


def variant(t, dtype=F, total=None, f32_groups=False, recip=False, log_plain=False):
    a, age, g, c = t["amount"], t["age"], t["group"], t["category"]
    n, k = len(a), t["categories"]
    out = np.zeros((n, 4 + k), F)
    x = a.astype(dtype)
    l = np.log(dtype(1) + x) if log_plain else np.log1p(x)
    mean = (total(l) / dtype(n)) if total else l.mean()
    d = l - mean
    var = (total(d * d) / dtype(n)) if total else np.mean(d * d)
    std = np.sqrt(var)
    if std > 0:
        out[:, 0] = d * (dtype(1) / std) if recip else d / std
    out[:, 1] = (np.clip(age.astype(dtype), 18, 90) - dtype(18)) / dtype(72)
    if f32_groups:
        sums = np.zeros(t["groups"], F)
        np.add.at(sums, g, l.astype(F))  # sequential float32 accumulation per group
        gmean = sums / np.maximum(np.bincount(g, minlength=t["groups"]), 1).astype(F)
    else:
        sums = np.bincount(g, weights=l, minlength=t["groups"])
        gmean = (sums / np.maximum(np.bincount(g, minlength=t["groups"]), 1)).astype(dtype)
    out[:, 2] = l - gmean[g]
    if n > 1:
        out[np.argsort(a, kind="stable"), 3] = np.arange(n, dtype=dtype) / dtype(n - 1)
    out[np.arange(n), 4 + c] = 1
    return out


VARIANTS = {
    "(a) float64": dict(dtype=np.float64),
    "(b) sequential": dict(total=seq_sum),
    "(c) blocks-256": dict(total=block_sum),
    "(d) f32 groups": dict(f32_groups=True),
    "(e) recip+log": dict(recip=True, log_plain=True),
}


def diffs(got, ref):
    res = []
    for j in range(4):
        g, r = got[:, j].astype(np.float64), ref[:, j].astype(np.float64)
        err = np.abs(g - r)
        nz = r != 0
        rel = np.where(nz, err / np.where(nz, np.abs(r), 1), 0)
        res.append((err.max(), rel.max(), (err / (np.abs(r) + 1)).max()))
    return res


def main(sizes):
    for n in sizes:
        t = make_table(n, seed=7 + n)
        ref = reference.preprocess(t)
        print(f"n = {n}: column: max abs / max rel / max abs/(|ref|+1)")
        for name, kw in VARIANTS.items():
            cols = diffs(variant(t, **kw), ref)
            print(f"  {name:15}" + "".join(
                f" | c{j} {a:.1e} {r:.1e} {m:.1e}" for j, (a, r, m) in enumerate(cols)))


if __name__ == "__main__":
    main([int(s) for s in sys.argv[1:]] or [1000, 100003, 1 << 20])
