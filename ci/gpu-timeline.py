#!/usr/bin/env python3
"""Who held each GPU when, from a grading run's lock trace (a benchmark's view, not a test).

    CUGRADE_GPU_TRACE=trace.txt cugrade grade ...      # or ci/cohort-bench.py --trace trace.txt
    ci/gpu-timeline.py trace.txt [--json OUT.json]

Each line of the trace is one hold of a GPU lock (`measure::lock`):
`KIND WHAT GPU ASKED GOT RELEASED PID`, KIND `shared` (correctness runs, worker starts,
compute-sanitizer passes, setups: any number at once) or `timing` (timed sections and ncu:
the GPU alone), times in seconds since the Unix epoch.

Per GPU it prints the wall time from the first request to the last release and splits it into:
  timed      the timing lock held (timed sections, ncu)
  shared     only shared users on the GPU
  draining   shared users still running while a timed section waits for them (new shared users
             are held at the turnstile meanwhile)
  idle       nothing held, nothing waiting for the timing lock
and, by user, how often and how long the lock was held and waited for; for the timing lock, how
many batches (back-to-back timed sections) there were and their mean size.
"""
import argparse
import collections
import json
import sys


def union(intervals):
    """Total length of the union of (start, end) intervals."""
    total, end = 0.0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def merged(intervals):
    out = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def intersect(xs, ys):
    """Length of the intersection of two merged interval lists."""
    i = j = 0
    total = 0.0
    while i < len(xs) and j < len(ys):
        a = max(xs[i][0], ys[j][0])
        b = min(xs[i][1], ys[j][1])
        if b > a:
            total += b - a
        if xs[i][1] < ys[j][1]:
            i += 1
        else:
            j += 1
    return total


def read(path):
    holds = collections.defaultdict(list)
    opened = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            parts = line.split()
            if len(parts) != 7:
                print("%s:%d: not a trace line, skipped" % (path, n), file=sys.stderr)
                continue
            kind, what, gpu = parts[:3]
            if kind == "held":
                opened[(what, gpu, parts[3], parts[4], parts[6])] = parts
                continue
            opened.pop((what, gpu, parts[3], parts[4], parts[6]), None)
            asked, got, released = map(float, parts[3:6])
            holds[gpu].append({"kind": kind, "what": what, "asked": asked, "got": got,
                               "released": released})
    if opened:
        end = max((h["released"] for hs in holds.values() for h in hs), default=0.0)
        print("%d holds still open at the end of the trace (taken, never released):" % len(opened))
        for what, gpu, asked, got, thread in sorted(opened, key=lambda k: float(k[3])):
            print("  %s on %s by thread %s, held since %.1f s before the last release"
                  % (what, gpu, thread, end - float(got)))
    return holds


def summarize(holds):
    start = min(h["asked"] for h in holds)
    end = max(h["released"] for h in holds)
    timed = merged([(h["got"], h["released"]) for h in holds if h["kind"] == "timing"])
    shared = merged([(h["got"], h["released"]) for h in holds if h["kind"] == "shared"])
    waiting = merged([(h["asked"], h["got"]) for h in holds
                      if h["kind"] == "timing" and h["got"] > h["asked"]])
    held = merged([(h["got"], h["released"]) for h in holds])
    wall = end - start
    timed_s = union(timed)
    draining = intersect(merged(waiting), shared)
    shared_s = union(shared) - draining
    idle = wall - union(held)
    users = collections.OrderedDict()
    for h in sorted(holds, key=lambda h: (h["kind"], h["what"])):
        u = users.setdefault("%s %s" % (h["kind"], h["what"]),
                             {"n": 0, "held_s": 0.0, "max_s": 0.0, "waited_s": 0.0})
        d = h["released"] - h["got"]
        u["n"] += 1
        u["held_s"] += d
        u["max_s"] = max(u["max_s"], d)
        u["waited_s"] += h["got"] - h["asked"]
    # Batches: timed holds that follow each other within 5 ms.
    batches = []
    for a, b in sorted((h["got"], h["released"]) for h in holds if h["kind"] == "timing"):
        if batches and a - batches[-1][1] < 0.005:
            batches[-1][1] = b
            batches[-1][2] += 1
        else:
            batches.append([a, b, 1])
    return {
        "wall_s": round(wall, 2),
        "timed_s": round(timed_s, 2),
        "shared_only_s": round(shared_s, 2),
        "draining_s": round(draining, 2),
        "idle_s": round(idle, 2),
        "timing_batches": len(batches),
        "sections_per_batch": round(sum(b[2] for b in batches) / len(batches), 2) if batches else 0,
        "users": {k: {"n": v["n"], "held_s": round(v["held_s"], 2),
                      "mean_s": round(v["held_s"] / v["n"], 3), "max_s": round(v["max_s"], 2),
                      "waited_s": round(v["waited_s"], 2)} for k, v in users.items()},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--json")
    a = ap.parse_args()
    holds = read(a.trace)
    if not holds:
        sys.exit("%s: no GPU lock was held (was CUGRADE_GPU_TRACE set for the run?)" % a.trace)
    out = {}
    for gpu, hs in sorted(holds.items()):
        s = summarize(hs)
        out[gpu] = s
        w = s["wall_s"] or 1.0
        print("GPU %s: %.1f s from the first request to the last release" % (gpu, s["wall_s"]))
        for k in ("timed_s", "shared_only_s", "draining_s", "idle_s"):
            print("  %-14s %7.1f s  %5.1f %%" % (k[:-2], s[k], 100 * s[k] / w))
        print("  timing batches %d, %.1f sections each" % (s["timing_batches"], s["sections_per_batch"]))
        print("  %-28s %6s %9s %8s %8s %10s" % ("user", "n", "held s", "mean s", "max s", "waited s"))
        for k, u in s["users"].items():
            print("  %-28s %6d %9.1f %8.3f %8.2f %10.1f"
                  % (k, u["n"], u["held_s"], u["mean_s"], u["max_s"], u["waited_s"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
