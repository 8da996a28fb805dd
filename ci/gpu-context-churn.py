#!/usr/bin/env python3
"""How CUDA context creation and release scale with concurrent processes (not a test).

    python3 ci/gpu-context-churn.py        # on a GPU machine; needs only python3 and libcuda

Starts 3 short-lived processes per worker slot, with 1, 4 and 16 processes at once; each
initialises the driver, retains the primary context, allocates 1 MiB and releases the
context. Prints the wall time and the mean per-process time of each step. On an H100
(2026-11-23) the driver did these one at a time: 16 processes at once took 1.9 s per context
to create and 1.2 s to release (0.12 s and 0.06 s alone), which is why cugrade keeps one
worker per student rather than one per milestone (docs/validation/cohort-bench.md).
"""
import ctypes
import multiprocessing as mp
import time


def one(_):
    t0 = time.time()
    cu = ctypes.CDLL("libcuda.so.1")
    assert cu.cuInit(0) == 0
    t1 = time.time()
    dev = ctypes.c_int()
    cu.cuDeviceGet(ctypes.byref(dev), 0)
    ctx = ctypes.c_void_p()
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    cu.cuCtxSetCurrent(ctx)
    p = ctypes.c_uint64()
    cu.cuMemAlloc_v2(ctypes.byref(p), 1 << 20)
    t2 = time.time()
    cu.cuDevicePrimaryCtxRelease(dev)
    t3 = time.time()
    return (t1 - t0, t2 - t1, t3 - t2)


if __name__ == "__main__":
    for n in (1, 4, 16):
        started = time.time()
        with mp.get_context("spawn").Pool(n) as pool:
            r = pool.map(one, range(n * 3))
        wall = time.time() - started
        avg = [sum(x[i] for x in r) / len(r) for i in range(3)]
        print("procs %2d: %d contexts in %.2f s wall; per process init %.3f ctx %.3f release %.3f"
              % (n, len(r), wall, *avg), flush=True)
