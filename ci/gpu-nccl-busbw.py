#!/usr/bin/env python3
"""NCCL's all-reduce bus bandwidth on the GPUs of one host (issue 35, the baseline a multi-GPU
lab grades against): float32 sums at three sizes, one process driving every GPU
(`NcclCommunicator.initAll`), timed with CUDA events on each GPU's stream, the slowest GPU's
time counting. Bus bandwidth as NCCL's own tests define it: 2 (n - 1) / n x bytes / time.

    NCCL_NVLS_ENABLE=0 python3 ci/gpu-nccl-busbw.py [--gpus 0,1] [--iters 20]

NVLink multicast (NVLS) stays off: this script refuses to run with NCCL_NVLS_ENABLE other than
0 (on the lent machines it can take a shared host's GPUs out of service). Needs CuPy with NCCL
(the GPU machines have `nvidia-nccl-cu13`); says plainly when NCCL cannot be loaded.
"""
import argparse
import glob
import os
import site
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", default="0,1")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--sizes-mib", default="1,64,512")
    a = ap.parse_args()
    if os.environ.get("NCCL_NVLS_ENABLE") != "0":
        sys.exit("set NCCL_NVLS_ENABLE=0 first: NVLink multicast stays off")
    import cupy as cp
    try:
        from cupy.cuda import nccl
        if not nccl.available:
            raise ImportError("cupy.cuda.nccl.available is False")
    except Exception as e:  # noqa: BLE001
        libs = [p for d in site.getsitepackages() for p in glob.glob(f"{d}/nvidia/nccl/lib/libnccl*")]
        sys.exit(f"NCCL cannot be loaded through CuPy ({e}); libnccl found at: {libs or 'nowhere'}")
    gpus = [int(g) for g in a.gpus.split(",")]
    n = len(gpus)
    print(f"NCCL {nccl.get_version()}, CuPy {cp.__version__}, GPUs {gpus}: "
          + ", ".join(cp.cuda.runtime.getDeviceProperties(g)["name"].decode() for g in gpus))
    for i in gpus:
        for j in gpus:
            if i != j:
                print(f"  peer access {i} -> {j}: {bool(cp.cuda.runtime.deviceCanAccessPeer(i, j))}")
    comms = nccl.NcclCommunicator.initAll(gpus)
    for mib in [int(s) for s in a.sizes_mib.split(",")]:
        count = mib * (1 << 20) // 4
        bufs, streams = [], []
        for g in gpus:
            with cp.cuda.Device(g):
                send = cp.ones(count, dtype=cp.float32)
                recv = cp.zeros(count, dtype=cp.float32)
                bufs.append((send, recv))
                streams.append(cp.cuda.Stream(non_blocking=True))

        def once():
            nccl.groupStart()
            for r, g in enumerate(gpus):
                with cp.cuda.Device(g):
                    s, d = bufs[r]
                    comms[r].allReduce(s.data.ptr, d.data.ptr, count, nccl.NCCL_FLOAT32,
                                       nccl.NCCL_SUM, streams[r].ptr)
            nccl.groupEnd()

        for _ in range(5):
            once()
        for r, g in enumerate(gpus):
            with cp.cuda.Device(g):
                streams[r].synchronize()
        times = []
        for _ in range(a.iters):
            ev = []
            for r, g in enumerate(gpus):
                with cp.cuda.Device(g):
                    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
                    e0.record(streams[r])
                    ev.append((e0, e1))
            once()
            for r, g in enumerate(gpus):
                with cp.cuda.Device(g):
                    ev[r][1].record(streams[r])
            ms = 0.0
            for r, g in enumerate(gpus):
                with cp.cuda.Device(g):
                    ev[r][1].synchronize()
                    ms = max(ms, cp.cuda.get_elapsed_time(ev[r][0], ev[r][1]))
            times.append(ms)
        times.sort()
        med = times[len(times) // 2]
        nbytes = count * 4
        algbw = nbytes / (med * 1e-3) / 1e9
        busbw = algbw * 2 * (n - 1) / n
        ok = all(float(bufs[r][1][0].get()) == float(n) and float(bufs[r][1][-1].get()) == float(n)
                 for r in range(n))
        print(f"  {mib:5d} MiB: median {med:.3f} ms (min {times[0]:.3f}) over {a.iters}: "
              f"algbw {algbw:.1f} GB/s, busbw {busbw:.1f} GB/s; sum checked: {ok}")
        del bufs
    for c in comms:
        c.destroy()


if __name__ == "__main__":
    main()
