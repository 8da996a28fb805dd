"""Reference for the preprocess lab (docs/labs/preprocess.md): the canonical definition of
every feature, in plain NumPy, float32 throughout. It is also the CPU baseline that a CuPy
port must beat on a GPU, so it is vectorised NumPy (no Python loop over rows or groups).

table: a dict of host arrays (C-contiguous) and ints
    amount   float32[n]  uniform in [0, 10000)
    age      float32[n]  uniform in [0, 120)
    group    int32[n]    in [0, groups)
    category int32[n]    in [0, categories)
    groups, categories: int
returns: float32[n, 4 + categories], row i:
    0   z-score of l = log1p(amount): (l - mean(l)) / std(l), population std (ddof=0);
        0.0 for every row when std(l) == 0 (n == 1, or all amounts equal)
    1   (clip(age, 18, 90) - 18) / 72
    2   l - (mean of l over the rows of the same group)
    3   percentile rank of amount: stable rank (ties by row index) / (n - 1); 0.0 when n == 1
    4+  one-hot of category (1.0 in column 4 + category)
"""

import numpy as np


def preprocess(table):
    amount = table["amount"]
    age = table["age"]
    group = table["group"]
    category = table["category"]
    groups = int(table["groups"])
    categories = int(table["categories"])
    n = amount.shape[0]

    # Zeros: the one-hot columns are zero except one entry per row.
    out = np.zeros((n, 4 + categories), dtype=np.float32)

    # 0: z-score of the log amount. np.mean/np.std of a float32 array sum in float32
    # (pairwise); std is the population std, sqrt(mean((l - mean)^2)), as np.std(l).
    l = np.log1p(amount)  # float32
    d = l - l.mean()
    std = np.sqrt(np.mean(d * d))
    if std > 0:
        out[:, 0] = d / std
    # else: a constant column has no spread; its z-score is 0 (already zero)

    # 1: age clipped to [18, 90], scaled to [0, 1].
    out[:, 1] = (np.clip(age, np.float32(18), np.float32(90)) - np.float32(18)) / np.float32(72)

    # 2: l minus its group's mean. np.bincount sums the weights in float64; the mean per
    # group is rounded to float32 before the subtraction. Groups without rows are never
    # indexed (the max(count, 1) only avoids a 0/0 warning for them).
    sums = np.bincount(group, weights=l, minlength=groups)
    counts = np.bincount(group, minlength=groups)
    gmean = (sums / np.maximum(counts, 1)).astype(np.float32)
    out[:, 2] = l - gmean[group]

    # 3: percentile rank. One stable argsort (equal amounts keep their row order), then a
    # scatter: the row at sorted position k gets k / (n - 1). k and n - 1 are exact in
    # float32 for n <= 2^24, so the float32 division is correctly rounded.
    if n > 1:
        order = np.argsort(amount, kind="stable")
        out[order, 3] = np.arange(n, dtype=np.float32) / np.float32(n - 1)

    # 4..: one-hot of the category.
    out[np.arange(n), 4 + category] = 1.0
    return out
