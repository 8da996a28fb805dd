#!/usr/bin/env bash
# The sandbox on a GPU machine, as root AND as an unprivileged user (nobody): CUDA grading works
# with every layer (a PID namespace per worker, the worker's own uid when cugrade is root, a
# private mount view with the driver's device files, seccomp, Landlock), and the hostile-import
# attacks of tests/it/hostile.rs are contained on the `--backend cuda` path too.
#
# Usage (from the repository root, as root, after ci/gpu-numba.sh --unpack installed Numba):
#   ci/gpu-sandbox.sh BINARY OUTDIR [LEG...]     (LEG: root, nobody; default both)
# The legs run side by side (the GPU timing lock in /tmp/cugrade-locks, shared by root and
# nobody, keeps timed sections apart): first both legs' examples, then both legs' attacks.
# GPU_SANDBOX_SERIAL=1 runs them one after the other instead.
# Writes OUTDIR/gpu-sandbox.log. The last line is `gpu-sandbox: PASS (...)` when every check
# held (exit 0), else `gpu-sandbox: FAIL (...)` (exit 1) with each failure listed: `FAIL` lines
# are a check that did not hold (an attack that succeeded, a wrong verdict), `NOT RUN` lines an
# attack that never ran (e.g. Numba missing: the import failed before the attack's code), which
# proves nothing either way and fails the run too. Per leg it records:
#   - `doctor`'s sandbox lines (as root: `identity: a uid of the worker's own ...`; the
#     `cgroup:` line says whether workers got cgroups, and the cgroup they go below);
#   - every example of submissions-example graded with `grade --backend cuda --jobs 4`, each
#     milestone against its expected.yaml (`gpu:` first, else the emulator's verdict; a
#     `skipped` one must have right answers), and the sandbox lines the GPU workers reported
#     (`SANDBOX ... DEGRADED` lines are failures: they say which layer CUDA could not live with,
#     e.g. "mounts: DEGRADED (CUDA did not start inside the full sandbox ...)"; except the
#     `cgroup:` line, which says what the host delegates, and is only recorded);
#   - the attacks, graded with --backend cuda: a UNIX socket outside, chmod u+s/utime/setxattr
#     on a root-owned file outside, a double-fork setsid daemon, memfd and tmpfs filling, a fork
#     bomb beside an honest student under --jobs 2 (same score as alone), SIGINT and SIGKILL of
#     a cohort mid-grading; after each, no process of the run alive and no temp folder left.
# Needs: python3, util-linux (unshare, setpriv, mount), NVRTC (the CUDA toolkit's).
# GPU_SANDBOX_BACKEND=emu runs the same checks on the emulator (to test this script without a
# GPU; the examples' expected verdicts are then the emulator's).
set -uo pipefail
bin=$(readlink -f "$1"); out="$2"
mkdir -p "$out"; out=$(readlink -f "$out")
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
  "${CUGRADE_NVRTC_CACHE:-$HOME/.cache/cugrade-nvrtc}/numba/nvidia/cu13/lib"; do
  [ -f "$d/libnvrtc.so.13" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" && break
done
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -f "$d/libcublas.so.13" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
{
  echo "# cugrade GPU sandbox run, $(date -u +%Y-%m-%dT%H:%MZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  uname -r; id; "$bin" --version
  ls -l /dev/nvidia* 2>&1 | head -20
} 2>&1 | tee -a "$out/gpu-sandbox.log"
shift 2
exec python3 - "$bin" "$out" "$@" <<'PY'
import json, os, re, shutil, signal, socket, subprocess, sys, tempfile, threading, time

BIN, OUT = sys.argv[1], sys.argv[2]
LEGS = sys.argv[3:] or ["root", "nobody"]
REPO = os.getcwd()
LOG = open(os.path.join(OUT, "gpu-sandbox.log"), "a")
NOBODY = 65534
# `emu` checks this script itself on a machine without a GPU (the verdicts are the emulator's).
BACKEND = os.environ.get("GPU_SANDBOX_BACKEND", "cuda")
failures, not_run = [], []
T0 = time.time()
SAY = threading.Lock()


def say(*a):
    with SAY:
        print(*a, flush=True)
        print(*a, file=LOG, flush=True)


def fail(what):
    """A check that did not hold: an attack that succeeded, a wrong verdict, a leftover."""
    failures.append(what)
    say("FAIL", what)


def notrun(what):
    """An attack whose code never ran (so nothing was shown either way)."""
    not_run.append(what)
    say("NOT RUN", what)


def why(res, r=None):
    """The first failing check's message (or the grader's stderr), to say why nothing ran."""
    if res:
        for m in res["milestones"]:
            for c in m["checks"]:
                if c["status"] != "pass" and c["kind"] != "performance":
                    return (c.get("message") or "") + " " + (c.get("details") or "")[-300:]
    return (r.stderr[-400:] if r is not None else "")


CACHE = os.environ.get("CUGRADE_NVRTC_CACHE") or os.path.expanduser("~/.cache/cugrade-nvrtc")
PYTHON = os.path.realpath(os.environ.get("CUGRADE_PYTHON") or shutil.which("python3"))
WORK = tempfile.mkdtemp(prefix="cugrade-gpu-sbx-")
os.chmod(WORK, 0o755)
shutil.copy(BIN, os.path.join(WORK, "cugrade"))
for d in ("rubrics", "reference-kernels", "submissions-example"):
    shutil.copytree(os.path.join(REPO, d), os.path.join(WORK, d))
subprocess.run(["chmod", "-R", "a+rX", WORK], check=True)
CUGRADE = os.path.join(WORK, "cugrade")


def closed_ancestor(path):
    """The outermost directory above `path` that others may not enter (e.g. /root)."""
    parts = os.path.realpath(path).split("/")[1:]
    cur = ""
    for p in parts[:-1]:
        cur += "/" + p
        if os.path.isdir(cur) and not os.stat(cur).st_mode & 0o001:
            return cur
    return None


def expose_script(needed, stage):
    """Shell: hide each closed directory behind a tmpfs holding only the needed paths."""
    q = lambda p: "'" + p.replace("'", "'\\''") + "'"
    groups = {}
    for p in needed:
        if not os.path.exists(p):
            continue
        real = os.path.realpath(p)
        a = closed_ancestor(real)
        if a:
            groups.setdefault(a, []).append(real)
    s, n = "set -e\n", 0
    for d, paths in groups.items():
        moves = []
        for p in paths:
            st = os.path.join(stage, str(n)); n += 1
            s += f"mkdir -p {q(st)}; touch {q(st)}.f\n"
            tgt = st if os.path.isdir(p) else st + ".f"
            s += f"mount --bind {q(p)} {q(tgt)}\n"
            moves.append((tgt, p))
        s += f"mount -t tmpfs -o mode=0755 tmpfs {q(d)}\n"
        for tgt, p in moves:
            if os.path.isdir(p):
                s += f"mkdir -p {q(p)}\n"
            else:
                s += f"mkdir -p {q(os.path.dirname(p))}; touch {q(p)}\n"
            s += f"mount --bind {q(tgt)} {q(p)}\n"
    s += f'exec setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups "$@"\n'
    return s


class Leg:
    def __init__(self, name):
        self.name = name
        self.n = 0

    def fresh(self, tag):
        """A run's own TMPDIR, HOME and output dir, owned by the leg's user."""
        self.n += 1
        base = os.path.join(WORK, f"{self.name}-{self.n}-{tag}")
        dirs = [os.path.join(base, x) for x in ("tmp", "home", "out", "outside")]
        for d in [base] + dirs:
            os.makedirs(d, exist_ok=True)
            os.chmod(d, 0o755)
            if self.name == "nobody" and not d.endswith("outside") and d != base:
                os.chown(d, NOBODY, NOBODY)
        return dirs

    def cmd(self, args, tmp, home):
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LD_LIBRARY_PATH": os.environ.get("LD_LIBRARY_PATH", ""),
            "HOME": home, "TMPDIR": tmp, "NO_COLOR": "1",
            "CUGRADE_NVRTC_CACHE": CACHE, "CUGRADE_PYTHON": PYTHON,
        }
        if self.name == "root":
            return [CUGRADE] + args, env
        needed = [CACHE, PYTHON, os.path.dirname(os.path.dirname(PYTHON))]
        needed += [p for p in env["LD_LIBRARY_PATH"].split(":") if p.startswith("/")]
        script = expose_script(needed, os.path.join(WORK, f"stage-{self.name}-{self.n}"))
        return ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", CUGRADE] + args, env

    def run(self, args, tmp, home, timeout=900):
        c, env = self.cmd(args, tmp, home)
        return subprocess.run(c, env=env, cwd=WORK, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)

    def spawn(self, args, tmp, home):
        c, env = self.cmd(args, tmp, home)
        return subprocess.Popen(c, env=env, cwd=WORK, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def survivors(tmp):
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
            state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if tmp in cmd and state != "Z":
            out.append(f"{pid}: {cmd[:200]}")
    return out


# What /tmp held before: a run's temp folders go under its own TMPDIR, but a grader that
# ignored TMPDIR would leave them here. /tmp/cugrade-locks (the GPU timing locks, shared by
# every grader on the machine and kept between runs) is no run's temp file.
TMP_BEFORE = set(os.listdir("/tmp"))
KEPT = {"cugrade-locks", os.path.basename(WORK)}


def clean(leg, tmp, what):
    deadline = time.time() + 5
    while survivors(tmp) and time.time() < deadline:
        time.sleep(0.1)
    left = survivors(tmp)
    if left:
        fail(f"{leg.name} {what}: still running: {left}")
    temp = [n for n in os.listdir(tmp) if n not in KEPT]
    if temp:
        fail(f"{leg.name} {what}: temp files left: {temp}")


def stray_in_tmp():
    """After every leg: cugrade's folders made in /tmp despite TMPDIR (on a machine where
    nothing else runs cugrade meanwhile)."""
    stray = [n for n in set(os.listdir("/tmp")) - TMP_BEFORE if n.startswith("cugrade") and n not in KEPT]
    if stray:
        fail(f"temp files left in /tmp (not under the runs' TMPDIR): {sorted(stray)}")


def expected(path):
    want, section = {"milestones": {}, "gpu": {}}, None
    for line in open(path):
        line = line.split("#")[0].rstrip()
        if re.match(r"^\w", line):
            section = line.rstrip(":") if line.endswith(":") else None
        elif section in want and ":" in line:
            k, v = line.strip().split(":", 1)
            want[section][k.strip()] = v.strip()
    return want


def judge(result, want):
    bad = []
    for m in result["milestones"]:
        got = m["status"]
        exp = (want["gpu"].get(m["id"]) if BACKEND == "cuda" else None) or want["milestones"].get(m["id"])
        if exp == "skipped":
            wrong = [c for c in m["checks"] if c["kind"] != "performance" and c["status"] != "pass"]
            if wrong:
                bad.append(f'{m["id"]}: {wrong[0]["name"]}: {wrong[0]["message"]}')
        elif exp and exp != got:
            bad.append(f'{m["id"]} is {got}, expected {exp}')
    return bad


def examples(leg):
    tmp, home, out, _ = leg.fresh("examples")
    layers = set()
    for lab in sorted(os.listdir(os.path.join(WORK, "submissions-example"))):
        cohort = os.path.join(WORK, "submissions-example", lab)
        lab_out = os.path.join(out, lab)
        os.makedirs(lab_out); os.chmod(lab_out, 0o755)
        if leg.name == "nobody":
            os.chown(lab_out, NOBODY, NOBODY)
        t0 = time.time()
        r = leg.run(["grade", "--backend", BACKEND, "--seed", "1", "--jobs", "4", "--rubric",
                     os.path.join(WORK, "rubrics", lab + ".yaml"), cohort, "--out", lab_out], tmp, home)
        say(f"{leg.name} {lab}: grade exit={r.returncode} in {time.time() - t0:.0f} s")
        for sub in sorted(os.listdir(cohort)):
            exp = os.path.join(cohort, sub, "expected.yaml")
            res = os.path.join(lab_out, "students", sub, "result.json")
            if not os.path.exists(exp):
                continue
            try:
                result = json.load(open(res))
            except OSError:
                fail(f"{leg.name} {lab}/{sub}: no result.json: {r.stderr[-800:]}")
                continue
            layers.update(result["run"].get("sandbox", []))
            bad = judge(result, expected(exp))
            summary = " ".join(f'{m["id"]}={m["status"]}' for m in result["milestones"])
            say(f"  {leg.name} {lab}/{sub}: {summary} {result['score']}/{result['max_score']}")
            for b in bad:
                fail(f"{leg.name} {lab}/{sub}: {b}")
        clean(leg, tmp, f"examples {lab}")
    for l in sorted(layers):
        say(f"  {leg.name} SANDBOX {l}")
        # The cgroup layer depends on what the host delegates (never, to nobody): noted only.
        if "DEGRADED" in l and not l.startswith("cgroup:"):
            fail(f"{leg.name}: a GPU-run layer is degraded: {l}")
    if not any(l.startswith("mounts: active") for l in layers):
        fail(f"{leg.name}: no worker reported the private mount view active")


KERNEL = ("from numba import cuda\n\n@cuda.jit\ndef vector_add(a, b, c, n):\n"
          "    i = cuda.grid(1)\n    if i < n:\n        c[i] = a[i] + b[i]\n")


def attack(body):
    return "import os, sys, json\nout = {}\n" + body + "\nraise RuntimeError('RESULT ' + json.dumps(out, sort_keys=True))\n"


def watched(leg, args, tmp, home, watch=None):
    """Run cugrade, polling `watch(tmp)` meanwhile: (exit code, stderr, the largest answer)."""
    if watch is None:
        r = leg.run(args, tmp, home)
        return r.returncode, r.stderr, None
    errf = os.path.join(home, f"stderr-{time.time_ns()}.txt")
    c, env = leg.cmd(args, tmp, home)
    best = None
    with open(errf, "w") as ef:
        p = subprocess.Popen(c, env=env, cwd=WORK, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=ef)
        deadline = time.time() + 900
        while p.poll() is None and time.time() < deadline:
            v = watch(tmp)
            best = v if best is None else max(best, v)
            time.sleep(0.05)
        if p.poll() is None:
            p.kill(); p.wait()
    return p.returncode, open(errf).read(), best


def correct(res):
    """The statuses of the first milestone's correctness checks (speed is the GPU's business)."""
    return [c["status"] for c in res["milestones"][0]["checks"] if c["kind"] != "performance"] if res else []


def check_one(leg, tag, text, rubric_extra="", watch=None):
    """Grade one attack submission. `watch(tmp)`: polled while the grader runs (e.g. to see
    the attack's processes); its last truthy answer is returned as the 4th value."""
    tmp, home, out, outside = leg.fresh(tag)
    rubric = os.path.join(out, "..", "rubric.yaml")
    # The reference beside the rubric: a rubric reads files of its own course tree only.
    shutil.copy(os.path.join(WORK, "reference-kernels", "vector-add.cu"), os.path.join(out, "..", "vector-add.cu"))
    src = open(os.path.join(WORK, "rubrics", "vector-add.yaml")).read().replace(
        "../reference-kernels/vector-add.cu", "vector-add.cu")
    open(rubric, "w").write(src + "\n" + rubric_extra + "\n")
    sub = os.path.join(out, "..", "sub", "mallory")
    os.makedirs(sub); os.chmod(os.path.dirname(sub), 0o755); os.chmod(sub, 0o755)
    open(os.path.join(sub, "k.py"), "w").write(text(outside, tmp) if callable(text) else text)
    j = os.path.join(home, "r.json")
    args = ["check", "--backend", BACKEND, "--seed", "3", "--rubric", rubric, sub, "--json", j]
    _, err, seen = watched(leg, args, tmp, home, watch)
    try:
        res = json.load(open(j))
    except OSError:
        notrun(f"{leg.name} {tag}: no result: {err[-800:]}")
        return None, tmp, outside, seen
    return res, tmp, outside, seen


def reported(res):
    """What the attack raised at import: the traceback's last `RuntimeError: RESULT {...}`."""
    for c in res["milestones"][0]["checks"]:
        t = c.get("details") or ""
        at = t.rfind("RuntimeError: RESULT ")
        if at >= 0:
            return json.loads(t[at + len("RuntimeError: RESULT "):].splitlines()[0])
    return None


def attacks(leg):
    # First a harmless import that reports: if even it does not report, Numba (or the import
    # path) does not work here and no attack below can run.
    res, tmp, _, _ = check_one(leg, "canary", attack("out['ran'] = True\n"))
    got = res and reported(res)
    say(f"{leg.name} canary import: {got}")
    if not got or not got.get("ran"):
        notrun(f"{leg.name}: every attack: a Numba import does not run here: {why(res)}")
        return
    clean(leg, tmp, "canary")

    # A UNIX socket listening outside.
    holder = {}
    def sock_src(outside, tmp):
        p = os.path.join(outside, "agent.sock")
        s = socket.socket(socket.AF_UNIX); s.bind(p); s.listen(1); s.setblocking(False)
        os.chmod(p, 0o777); holder["s"] = s
        return attack(f"import socket\ntry:\n    k = socket.socket(socket.AF_UNIX)\n    k.connect({p!r})\n"
                      f"    k.sendall(b'pwned')\n    out['connect'] = 'ok'\nexcept OSError as e:\n"
                      f"    out['connect'] = 'denied ' + str(e)\n")
    res, tmp, _, _ = check_one(leg, "socket", sock_src)
    got = res and reported(res)
    try:
        holder["s"].accept(); heard = True
    except OSError:
        heard = False
    say(f"{leg.name} unix socket: {got}; listener heard: {heard}")
    if got and got.get("connect") == "ok" or heard:
        fail(f"{leg.name}: UNIX socket outside reachable")
    elif not got:
        notrun(f"{leg.name}: UNIX socket attack: {why(res)}")
    clean(leg, tmp, "socket")

    # Metadata on a root-owned copy of /bin/true outside.
    def meta_src(outside, tmp):
        t = os.path.join(outside, "true"); shutil.copy("/bin/true", t)
        holder["t"] = (t, os.stat(t))
        return attack(f"for op, f in (('chmod', lambda: os.chmod({t!r}, 0o4755)), ('utime', lambda: os.utime({t!r}, (0, 0))),"
                      f" ('setxattr', lambda: os.setxattr({t!r}, 'user.x', b'1'))):\n"
                      "    try:\n        f(); out[op] = 'ok'\n    except OSError as e:\n        out[op] = 'denied ' + str(e.errno)\n")
    res, tmp, _, _ = check_one(leg, "metadata", meta_src)
    got = res and reported(res)
    t, before = holder["t"]; after = os.stat(t)
    say(f"{leg.name} metadata: {got}; mode {oct(before.st_mode)} -> {oct(after.st_mode)}")
    if (got and "ok" in got.values()) or (before.st_mode, before.st_mtime) != (after.st_mode, after.st_mtime):
        fail(f"{leg.name}: metadata write outside succeeded")
    elif not got:
        notrun(f"{leg.name}: metadata attack: {why(res)}")
    clean(leg, tmp, "metadata")

    # Double fork + setsid daemon (seen running while the grader runs, gone after it).
    spinner = lambda tmp: any("while True: pass" in l for l in survivors(tmp))
    res, tmp, _, seen = check_one(leg, "daemon", lambda outside, tmp: (
        "import os, sys, time\nif os.fork() == 0:\n    try:\n        os.setsid()\n    except OSError:\n        pass\n"
        f"    if os.fork() == 0:\n        os.execv(sys.executable, [sys.executable, '-c', 'while True: pass', {tmp!r}])\n"
        "    os._exit(0)\ntime.sleep(1)\n" + KERNEL), watch=spinner)
    status = res and res["milestones"][0]["status"]
    say(f"{leg.name} daemon: started {bool(seen)}; vector_add {status}")
    if not seen:
        notrun(f"{leg.name}: daemon attack: the daemon was never seen running: {why(res)}")
    elif not correct(res) or any(st != "pass" for st in correct(res)):
        fail(f"{leg.name}: the daemon's kernel was not graded as usual: {why(res)}")
    clean(leg, tmp, "daemon")

    # memfd and tmpfs.
    res, tmp, _, _ = check_one(leg, "memfd", attack(
        "try:\n    os.memfd_create('x'); out['memfd'] = 'ok'\nexcept OSError as e:\n    out['memfd'] = 'denied ' + str(e.errno)\n"
        "out['dev shm'] = os.path.exists('/dev/shm')\nmib = 0\nchunk = b'x' * (16 << 20)\n"
        "try:\n    for i in range(1000):\n        with open(os.path.join(os.environ['TMPDIR'], 'f%d' % i), 'wb') as f:\n"
        "            for _ in range(8):\n                f.write(chunk); mib += 16\nexcept OSError as e:\n    out['fill'] = e.errno\nout['mib'] = mib\n"
        # Free the space again, so that the outcome can be reported (a scratch left full is
        # the submission's compile failure: "filled its ... scratch space").
        "for n in os.listdir(os.environ['TMPDIR']):\n    if n.startswith('f'):\n        os.remove(os.path.join(os.environ['TMPDIR'], n))\n"))
    got = res and reported(res)
    say(f"{leg.name} memfd/tmpfs: {got}")
    if not got:
        notrun(f"{leg.name}: memfd/tmpfs attack: {why(res)}")
    elif got.get("memfd") == "ok" or got.get("fill") != 28 or got.get("mib", 0) > 1024:
        fail(f"{leg.name}: memfd or tmpfs not bounded")
    clean(leg, tmp, "memfd")

    # Fork bomb beside an honest student, --jobs 2.
    tmp, home, out, _ = leg.fresh("forkbomb")
    rubric = os.path.join(out, "..", "rubric.yaml")
    # The reference beside the rubric: a rubric reads files of its own course tree only.
    shutil.copy(os.path.join(WORK, "reference-kernels", "vector-add.cu"), os.path.join(out, "..", "vector-add.cu"))
    src = open(os.path.join(WORK, "rubrics", "vector-add.yaml")).read().replace(
        "../reference-kernels/vector-add.cu", "vector-add.cu")
    open(rubric, "w").write(src + "\ntimeouts: {compile_s: 10}\n")
    cohort = os.path.join(out, "..", "cohort")
    for name, text in (("honest", KERNEL), ("bomb", "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n")):
        os.makedirs(os.path.join(cohort, name)); open(os.path.join(cohort, name, "k.py"), "w").write(text)
    subprocess.run(["chmod", "-R", "a+rX", os.path.dirname(cohort)])
    alone = os.path.join(home, "alone.json")
    leg.run(["check", "--backend", BACKEND, "--seed", "3", "--rubric", rubric, os.path.join(cohort, "honest"), "--json", alone], tmp, home)
    t0 = time.time()
    # The bomb's processes at their peak (each runs the driver, named with the run's TMPDIR).
    _, err, peak = watched(leg, ["grade", "--backend", BACKEND, "--seed", "3", "--jobs", "2", "--rubric", rubric, cohort, "--out", out],
                           tmp, home, lambda tmp: len(survivors(tmp)))
    try:
        a = json.load(open(alone)); g = json.load(open(os.path.join(out, "students", "honest", "result.json")))
        b = json.load(open(os.path.join(out, "students", "bomb", "result.json")))
        say(f"{leg.name} fork bomb: honest alone {a['score']}, beside the bomb {g['score']}, bomb {b['score']}, "
            f"peak {peak} processes ({time.time() - t0:.0f} s)")
        if not correct(a) or any(st != "pass" for st in correct(a)):
            notrun(f"{leg.name}: fork bomb: the honest student fails even alone: {why(a)}")
        elif (peak or 0) < 10:
            notrun(f"{leg.name}: fork bomb: at most {peak} processes were seen, the bomb did not go off: {why(b)}")
        elif correct(a) != correct(g) or b["score"] != 0:
            fail(f"{leg.name}: the fork bomb changed the honest student's correctness checks (or scored)")
    except (OSError, ValueError) as e:
        notrun(f"{leg.name} fork bomb: no result ({e}): {err[-400:]}")
    clean(leg, tmp, "fork bomb")

    # SIGINT and SIGKILL mid-cohort.
    for sig in (signal.SIGINT, signal.SIGKILL):
        tmp, home, out, _ = leg.fresh(f"signal{int(sig)}")
        cohort = os.path.join(out, "..", "cohort")
        for name in "abc":
            os.makedirs(os.path.join(cohort, name))
            open(os.path.join(cohort, name, "k.py"), "w").write("import time\ntime.sleep(600)\n" + KERNEL)
        subprocess.run(["chmod", "-R", "a+rX", os.path.dirname(cohort)])
        rubric = os.path.join(WORK, "rubrics", "vector-add.yaml")
        p = leg.spawn(["grade", "--backend", BACKEND, "--jobs", "2", "--rubric", rubric, cohort, "--out", out], tmp, home)
        deadline = time.time() + 90
        while sum("cugrade_numba_driver" in l for l in survivors(tmp)) < 2 and time.time() < deadline:
            time.sleep(0.2)
        started = sum("cugrade_numba_driver" in l for l in survivors(tmp)) >= 2
        p.send_signal(sig)
        code = p.wait(timeout=60)
        say(f"{leg.name} {signal.Signals(sig).name} mid-cohort: workers were running: {started}; exit {code}")
        if not started:
            notrun(f"{leg.name}: {signal.Signals(sig).name}: two workers never ran within 90 s: {p.stderr.read()[-400:]}")
        elif sig == signal.SIGINT and code != 130:
            fail(f"{leg.name}: SIGINT exit {code}: {p.stderr.read()[-400:]}")
        elif sig == signal.SIGINT:
            # Every student sleeps at import: none may have a result (a worker ended by the
            # interrupt is no failing submission; `--resume` grades them all).
            graded = [n for n in "abc" if os.path.exists(os.path.join(out, "students", n, "result.json"))]
            if graded:
                fail(f"{leg.name}: results written for students the SIGINT interrupted: {graded}")
        if sig == signal.SIGKILL:
            deadline = time.time() + 5
            while survivors(tmp) and time.time() < deadline:
                time.sleep(0.1)
            if survivors(tmp):
                fail(f"{leg.name}: workers outlived a SIGKILLed grader: {survivors(tmp)}")
            leg.run(["doctor"], tmp, home)  # the next run removes what the killed one left
        clean(leg, tmp, signal.Signals(sig).name)


def phase(leg, what):
    try:
        if what == "examples":
            tmp, home, _, _ = leg.fresh("doctor")
            d = leg.run(["doctor"], tmp, home)
            for line in d.stdout.splitlines():
                if "sandbox" in line or "GPU" in line or "Numba" in line:
                    say(f"  {leg.name} doctor: " + line)
            examples(leg)
        else:
            attacks(leg)
    except Exception as e:  # a bug here must not pass for a held check
        fail(f"{leg.name} {what}: the script failed: {e!r}")
    say(f"{leg.name}: {what} done at {time.time() - T0:.0f} s")


legs = [Leg(n) for n in LEGS]
serial = os.environ.get("GPU_SANDBOX_SERIAL") == "1"
# GPU_SANDBOX_PHASES=attacks: only the attacks (to try this script quickly; not a full run).
for what in os.environ.get("GPU_SANDBOX_PHASES", "examples attacks").split():
    say(f"\n## {what}: legs {', '.join(LEGS)}{' one after the other' if serial else ' side by side'}")
    if serial:
        for leg in legs:
            phase(leg, what)
    else:
        threads = [threading.Thread(target=phase, args=(leg, what)) for leg in legs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

stray_in_tmp()
took = time.time() - T0
say(f"\ngpu-sandbox: {len(failures)} failure(s), {len(not_run)} not run, legs {', '.join(LEGS)}, {took:.0f} s")
for f in failures:
    say("  FAIL " + f)
for f in not_run:
    say("  NOT RUN " + f)
verdict = "FAIL" if failures or not_run else "PASS"
say(f"gpu-sandbox: {verdict} ({len(failures)} failed, {len(not_run)} not run, {took:.0f} s)")
sys.exit(1 if failures or not_run else 0)
PY
