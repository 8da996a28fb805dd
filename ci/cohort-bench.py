#!/usr/bin/env python3
"""Throughput benchmark (not a test): grade a synthetic reduction cohort and report the wall
time per student and per student-milestone, and the grader's own overhead (wall time minus
the kernel time the performance checks measured).

    ci/cohort-bench.py --cugrade target/release/cugrade [--students 200] [--jobs N]
                       [--backend emu|cuda|auto] [--rubric rubrics/reduction.yaml]
                       [--gpus LIST] [--keep DIR] [--json OUT.json] [--grades OUT.csv]

The cohort is the reduction lab's example submissions (good, buggy, hanging) repeated to the
requested size; each copy gets a comment line naming its student, so no two submissions are
byte-identical (nothing is served from a cache that a real cohort would not hit). The seed is
fixed (1), so two runs grade the same inputs.

Kernel time: for every performance check, the timed launches of the student's kernel (and of a
paired GPU baseline) as result.json's `timing` records them. On the emulator no kernel is timed,
so the overhead is the whole wall time (emulation included). Runs on a GPU machine with a
prebuilt binary and python3 only (ci/gpu-cohort-bench.sh). Results: docs/validation/.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MEDIAN = re.compile(r"kernel median ([0-9.eE+-]+) ms over ([0-9]+) runs")
WARMUPS = 3


def make_cohort(dest, students, numba=True):
    examples_dir = os.path.join(REPO, "submissions-example", "reduction")
    examples = sorted(os.listdir(examples_dir))
    if not numba:  # a machine without the Numba toolchain (and no network to install it)
        examples = [e for e in examples
                    if not any(f.endswith(".py") for f in os.listdir(os.path.join(examples_dir, e)))]
    for i in range(students):
        name = examples[i % len(examples)]
        d = os.path.join(dest, "student%03d-%s" % (i + 1, name))
        os.makedirs(d)
        for f in sorted(os.listdir(os.path.join(examples_dir, name))):
            if f == "expected.yaml":
                continue
            with open(os.path.join(examples_dir, name, f)) as src:
                text = src.read()
            with open(os.path.join(d, f), "w") as out:
                comment = "#" if f.endswith(".py") else "//"
                out.write("%s synthetic student %d\n%s" % (comment, i + 1, text))


def kernel_seconds(check):
    """Seconds the GPU spent running timed kernels for this check: the student's timed launches
    and probe (`timing.samples_ms`, `timing.probe_ms`), and a paired GPU baseline (a
    reference kernel or cuBLAS, timed launch for launch: its median times the samples). Older
    results without `timing`: the median and run count the message gives."""
    t = check.get("timing")
    if isinstance(t, dict):
        samples = [x for x in t.get("samples_ms") or [] if isinstance(x, (int, float))]
        ms = sum(samples) + (t.get("probe_ms") or 0.0)
        b = t.get("baseline") or {}
        if b.get("paired") and not str(b.get("kind", "")).startswith("cpu"):
            ms += (b.get("median_ms") or 0.0) * len(samples)
        return ms / 1000.0
    m = MEDIAN.search(check.get("message", ""))
    if m:
        return float(m.group(1)) * (int(m.group(2)) + WARMUPS) / 1000.0
    return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cugrade", default=os.path.join(REPO, "target", "release", "cugrade"))
    ap.add_argument("--students", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--rubric", default=os.path.join(REPO, "rubrics", "reduction.yaml"))
    ap.add_argument("--no-numba", action="store_true",
                    help="leave out the Numba examples (no Numba toolchain on this machine)")
    ap.add_argument("--keep", help="keep the cohort and the output tree here")
    ap.add_argument("--json", help="also write the figures as JSON here")
    ap.add_argument("--gpus", help="passed to `cugrade grade --gpus` (e.g. 0,1)")
    ap.add_argument("--grades", help="copy the run's grades.csv here (to compare two runs)")
    ap.add_argument("--trace", help="record who held the GPU when (CUGRADE_GPU_TRACE) in this "
                    "file and print ci/gpu-timeline.py's summary of it")
    ap.add_argument("--time-limit", type=float, default=0,
                    help="stop grading after this many seconds and report the students graded "
                         "by then (a run that would not finish in a device call still says "
                         "where its time went)")
    a = ap.parse_args()
    if not os.access(a.cugrade, os.X_OK):
        sys.exit("cohort-bench: no cugrade binary at %s (--cugrade PATH)" % a.cugrade)
    work = a.keep or tempfile.mkdtemp(prefix="cugrade-bench.")
    cohort, out = os.path.join(work, "cohort"), os.path.join(work, "out")
    for p in (cohort, out):
        shutil.rmtree(p, ignore_errors=True)
    make_cohort(cohort, a.students, numba=not a.no_numba)
    cmd = [a.cugrade, "grade", "--rubric", a.rubric, cohort, "--out", out,
           "--backend", a.backend, "--jobs", str(a.jobs), "--seed", "1"]
    if a.gpus:
        cmd += ["--gpus", a.gpus]
    print("$ " + " ".join(cmd), flush=True)
    started = time.monotonic()
    env = dict(os.environ, CI="1")
    if a.trace:
        if os.path.exists(a.trace):
            os.remove(a.trace)
        env["CUGRADE_GPU_TRACE"] = os.path.abspath(a.trace)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        _, err = proc.communicate(timeout=a.time_limit or None)
    except subprocess.TimeoutExpired:
        proc.terminate()
        _, err = proc.communicate()
        print("cohort-bench: stopped after --time-limit %.0f s; figures for the students graded "
              "by then" % a.time_limit, flush=True)
    wall = time.monotonic() - started
    if proc.returncode not in (0, 1) and not a.time_limit:
        sys.stderr.write(err[-4000:])
        sys.exit("cohort-bench: cugrade exited %d" % proc.returncode)
    results = []
    students = os.path.join(out, "students")  # <out>/students/<id>/ since issue 17
    for d in sorted(os.listdir(students)):
        p = os.path.join(students, d, "result.json")
        if os.path.isfile(p):
            with open(p) as f:
                results.append(json.load(f))
    n = len(results)
    milestones = sum(len(r["milestones"]) for r in results)
    kernel = sum(kernel_seconds(c) for r in results for m in r["milestones"] for c in m["checks"]
                 if c.get("kind") == "performance")
    timed = sum(1 for r in results if r.get("run", {}).get("timed"))
    # The timed sections' hold on the GPU: the part of the wall time one GPU serialises.
    holds = [c["timing"]["gpu"] for r in results for m in r["milestones"] for c in m["checks"]
             if isinstance(c.get("timing"), dict) and isinstance(c["timing"].get("gpu"), dict)]
    held = sum(h.get("held_s", 0.0) for h in holds)
    setup = sum(h.get("setup_s", 0.0) for h in holds)
    waited = sum(h.get("waited_s", 0.0) for h in holds)
    # Per GPU (`grade --gpus`): students graded, timed sections' hold and wait, and any student
    # whose checks were timed on more than one GPU (never expected).
    def gpu_name(g):
        return "%s %s %s" % (g.get("index"), g.get("name"), g.get("uuid") or g.get("pci_bus_id") or "")
    per_gpu = {}
    split = []
    for r in results:
        g = r.get("run", {}).get("gpu")
        if isinstance(g, dict):
            e = per_gpu.setdefault(gpu_name(g), {"students": 0, "held_s": 0.0, "waited_s": 0.0})
            e["students"] += 1
        devs = set()
        for m in r["milestones"]:
            for c in m["checks"]:
                t = c.get("timing")
                if isinstance(t, dict) and isinstance(t.get("device"), dict):
                    devs.add(gpu_name(t["device"]))
                    h = t.get("gpu") or {}
                    e = per_gpu.setdefault(gpu_name(t["device"]),
                                           {"students": 0, "held_s": 0.0, "waited_s": 0.0})
                    e["held_s"] += h.get("held_s", 0.0)
                    e["waited_s"] += h.get("waited_s", 0.0)
        if len(devs) > 1:
            split.append(r.get("id") or r.get("student"))
    # Each student's grading wall time, by the example it copies.
    by_example = {}
    for r in results:
        secs = r.get("run", {}).get("seconds")
        if isinstance(secs, (int, float)):
            example = r.get("student", "?").split("-", 1)[-1]
            by_example.setdefault(example, []).append(secs)
    # The cohort's wall time by phase (result.json `run.phases`), summed over its students.
    phases = {}
    for r in results:
        for k, v in (r.get("run", {}).get("phases") or {}).items():
            if isinstance(v, (int, float)):
                phases[k] = phases.get(k, 0.0) + v
    graded_s = sum(r.get("run", {}).get("seconds") or 0.0 for r in results)
    figures = {
        "phases_s": {k: round(v, 2) for k, v in phases.items()},
        "student_seconds_s": round(graded_s, 2),
        "students": n, "student_milestones": milestones, "jobs": a.jobs,
        "backend": results[0]["backend"] if results else a.backend,
        "device": results[0].get("run", {}).get("device", "?") if results else "?",
        "students_timed": timed, "wall_s": round(wall, 2),
        "wall_per_student_s": round(wall / max(n, 1), 3),
        "kernel_s": round(kernel, 3),
        "overhead_s": round(wall - kernel, 2),
        "overhead_per_student_s": round((wall - kernel) / max(n, 1), 3),
        "overhead_per_student_milestone_s": round((wall - kernel) / max(milestones, 1), 3),
        "cpu_count": os.cpu_count(),
        "timed_sections": len(holds),
        "gpu_held_s": round(held, 2),
        "gpu_setup_s": round(setup, 2),
        "gpu_waited_s": round(waited, 2),
        "gpus": a.gpus or "",
        "per_gpu": {k: {"students": v["students"], "held_s": round(v["held_s"], 2),
                        "waited_s": round(v["waited_s"], 2)} for k, v in sorted(per_gpu.items())},
        "students_timed_on_several_gpus": split,
        "student_seconds_by_example": {k: {"n": len(v), "mean_s": round(sum(v) / len(v), 2),
                                           "max_s": round(max(v), 2)}
                                       for k, v in sorted(by_example.items())},
    }
    print("graded %(students)d students (%(student_milestones)d student-milestones) on %(device)s "
          "(backend %(backend)s, --jobs %(jobs)d, %(cpu_count)s CPUs)" % figures)
    print("wall %(wall_s).1f s = %(wall_per_student_s).3f s per student" % figures)
    print("kernel time measured by the performance checks: %(kernel_s).3f s "
          "(%(students_timed)d students timed)" % figures)
    print("grader overhead (wall - kernel): %(overhead_s).1f s = %(overhead_per_student_s).3f s per "
          "student = %(overhead_per_student_milestone_s).3f s per student-milestone" % figures)
    if holds:
        print("timed sections held the GPU for %(gpu_held_s).1f s in all (%(timed_sections)d sections); "
              "they waited %(gpu_waited_s).1f s for it, after %(gpu_setup_s).1f s of setup "
              "(allocations, uploads)" % figures)
    for k, v in figures["per_gpu"].items():
        print("GPU %s: %d students, timed sections held it %.1f s and waited %.1f s for it"
              % (k, v["students"], v["held_s"], v["waited_s"]))
    if split:
        print("WARNING: %d students were timed on more than one GPU: %s" % (len(split), split[:5]))
    if phases:
        print("students' grading time %.1f s in all (summed over jobs), by phase: %s" % (
            graded_s, ", ".join("%s %.1f" % (k[:-2] if k.endswith("_s") else k, v)
                                for k, v in phases.items() if v >= 0.05) or "none"))
    if by_example:
        print("grading wall time per student, by example (mean / max s): " + ", ".join(
            "%s %.1f/%.1f" % (k, v["mean_s"], v["max_s"])
            for k, v in figures["student_seconds_by_example"].items()))
    if a.trace and os.path.exists(a.trace):
        sys.stdout.flush()
        subprocess.call([sys.executable, os.path.join(HERE, "gpu-timeline.py"), a.trace])
    if a.json:
        with open(a.json, "w") as f:
            json.dump(figures, f, indent=2)
    if a.grades:
        if os.path.exists(os.path.join(out, "grades.csv")):
            shutil.copyfile(os.path.join(out, "grades.csv"), a.grades)
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
