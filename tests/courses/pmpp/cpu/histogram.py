"""CPU implementation of the pmpp course's histogram lab (rubrics/histogram.yaml)."""

import numpy as np


def histogram_cpu(data, hist, n):
    # bincount counts every byte value; minlength keeps the 256 bins even when the top
    # values never occur (a constant input, say).
    hist[:] = np.bincount(data[:n], minlength=256)[:256]
