# Correct, but the per-group mean is a Python loop over the 1000 groups that pulls a scalar
# back to the host for every group (`float(l[group == g].mean())`): an implicit device->host
# synchronisation per group. Passes on correctness; on a GPU the round trips eat the speedup.
import cupy as cp


def preprocess(table):
    amount = cp.asarray(table["amount"])
    age = cp.asarray(table["age"])
    group = cp.asarray(table["group"])
    category = cp.asarray(table["category"])
    groups = int(table["groups"])
    categories = int(table["categories"])
    n = amount.shape[0]

    out = cp.zeros((n, 4 + categories), dtype=cp.float32)

    # 0: z-score of log1p(amount), population std; 0 where the std is 0. cp.where keeps
    # the test on the device (an `if std > 0:` would wait for the GPU).
    l = cp.log1p(amount)
    d = l - l.mean()
    std = cp.sqrt(cp.mean(d * d))
    out[:, 0] = cp.where(std > 0, d / cp.maximum(std, cp.float32(1e-30)), cp.float32(0))

    # 1: clipped, scaled age
    out[:, 1] = (cp.clip(age, 18, 90) - 18) / 72

    # 2: l minus its group's mean, one group at a time. Each `int(...)` and `float(...)`
    # copies a scalar to the host and so waits for the GPU; the boolean mask indexing waits
    # too (it must know how many rows it selects). 1000 groups: thousands of round trips.
    gmean = cp.zeros(groups, dtype=cp.float32)
    for g in range(groups):
        rows = group == g
        if int(rows.sum()) > 0:
            gmean[g] = float(l[rows].mean())
    out[:, 2] = l - gmean[group]

    # 3: percentile rank: CuPy's argsort is stable, so ties keep their row order
    if n > 1:
        order = cp.argsort(amount)
        out[order, 3] = cp.arange(n, dtype=cp.float32) / cp.float32(n - 1)

    # 4..: one-hot
    out[cp.arange(n), 4 + category] = 1
    return out
