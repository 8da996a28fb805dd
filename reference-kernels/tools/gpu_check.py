"""Lab-authoring check on a real GPU, independent of cugrade (CuPy + NVRTC + NumPy).

For every rubric in rubrics/: runs each milestone's reference kernel on the rubric's
correctness cases and compares it with a NumPy float64 oracle (rubric tolerance), then runs
every example submission in submissions-example/<lab>/ against the reference (as the
grader does, with guard words after every buffer to catch out-of-bounds writes and a check
that inputs are unchanged), times the performance cases (CUDA events, median of 20 after 3
warm-ups) against a device copy, cuBLAS via CuPy, or the named reference entry, and prints
each milestone's status next to the example's expected.yaml (GPU view). `against: cpu` is
not timed here (the CPU implementations are Rust).

Examples whose expected status includes `error` (infinite loops) and the divergent-barrier
example are skipped: they can hang a real GPU.

Usage, from the repository root:
    python3 reference-kernels/tools/gpu_check.py --bundle   # needs PyYAML; writes .gpucheck/bundle.json
    python3 reference-kernels/tools/gpu_check.py [lab ...]  # on the GPU machine; needs cupy, numpy
The second step reads the bundle (so the GPU machine needs no YAML parser) and writes
$OUT/gpucheck.txt as well as printing.
"""
import json, math, sys, os, time, traceback

def make_bundle():
    import glob, yaml
    b = {"rubrics": {}, "examples": {}}
    for p in sorted(glob.glob("rubrics/*.yaml")):
        lab = os.path.basename(p)[:-5]
        r = yaml.safe_load(open(p))
        r["reference_src"] = open(os.path.join("rubrics", r["reference"])).read()
        b["rubrics"][lab] = r
    for d in sorted(glob.glob("submissions-example/*/*/")):
        lab, name = d.rstrip("/").split("/")[-2:]
        ex = {"expected": yaml.safe_load(open(d + "expected.yaml"))}
        cu = glob.glob(d + "*.cu"); ex["src"] = open(cu[0]).read(); ex["file"] = cu[0]
        m = d + "cugrade.yaml"
        ex["manifest"] = yaml.safe_load(open(m)) if os.path.exists(m) else {}
        b["examples"][f"{lab}/{name}"] = ex
    os.makedirs(".gpucheck", exist_ok=True)
    json.dump(b, open(".gpucheck/bundle.json", "w"))
    print("wrote .gpucheck/bundle.json:", len(b["rubrics"]), "rubrics,", len(b["examples"]), "examples")

if sys.argv[1:] == ["--bundle"]:
    make_bundle(); sys.exit(0)

import numpy as np, cupy as cp

OUT = os.environ.get("OUT", "/tmp")
LOG = open(os.path.join(OUT, "gpucheck.txt"), "w")
def log(*a):
    s = " ".join(str(x) for x in a); print(s); LOG.write(s + "\n"); LOG.flush()

B = json.load(open(".gpucheck/bundle.json"))
EPS = 2.0 ** -24
GUARD = 4096
def ceil_div(a, b): return -(-a // b)
NS = dict(ceil_div=ceil_div, min=min, max=max, sqrt=math.sqrt)
def ev(e, v):
    if isinstance(e, (int, float)): return e
    return eval(str(e), {"__builtins__": {}}, {**NS, **v})

def compile_mod(src, name):
    m = cp.RawModule(code=src, options=("--gpu-architecture=sm_90", "-lineinfo"), name=name)
    m.compile()
    return m

def gen(p, n, v, rng):
    g = p.get("gen") or {"uniform": [-1, 1]}
    dt = np.int32 if p["type"].startswith("i32") else np.float32
    k, a = next(iter(g.items()))
    if k == "uniform": x = rng.uniform(ev(a[0], v), ev(a[1], v), n)
    elif k == "normal": x = rng.normal(ev(a[0], v), ev(a[1], v), n)
    elif k == "int": x = rng.integers(int(ev(a[0], v)), int(ev(a[1], v)), n)
    elif k == "constant": x = np.full(n, ev(a, v))
    else: x = np.resize(np.array(a), n)
    return x.astype(dt)

def make_inputs(r, cname, v, seed):
    rng = np.random.default_rng(seed)
    c = r["contracts"][cname]; host = {}; scal = dict(v)
    for p in c["params"]:
        if p["type"].endswith("*"):
            n = int(ev(p["len"], v))
            if p.get("dir", "in") == "in": host[p["name"]] = gen(p, n, v, rng)
            else:
                dt = np.int32 if p["type"].startswith("i32") else np.float32
                host[p["name"]] = np.full(n, p["init"] if "init" in p else np.nan, dtype=dt)
        else:
            scal[p["name"]] = ev(p["value"], v)
    return host, scal

def run_kernel(mod, kname, r, cname, v, host, scal, launch):
    c = r["contracts"][cname]
    fn = mod.get_function(kname)
    dev = {}; args = []
    for p in c["params"]:
        nm = p["name"]
        if p["type"].endswith("*"):
            h = host[nm]
            buf = np.empty(len(h) + GUARD, dtype=h.dtype)
            buf[:len(h)] = h
            buf[len(h):] = np.nan if h.dtype == np.float32 else 0x3fffffff
            if p.get("symbol"):
                g = mod.get_global(nm); g.copy_from_host(h.ctypes.data, h.nbytes)
                continue
            d = cp.asarray(buf); dev[nm] = d; args.append(d)
        else:
            args.append(np.float32(scal[nm]) if p["type"] == "f32" else np.int32(scal[nm]))
    blk = [int(ev(x, scal)) for x in launch["block"]] + [1, 1]
    grd = [int(ev(x, scal)) for x in launch["grid"]] + [1, 1]
    sh = int(ev(launch.get("shared_bytes") or 0, scal))
    fn(tuple(grd[:3]), tuple(blk[:3]), tuple(args), shared_mem=sh)
    cp.cuda.runtime.deviceSynchronize()
    outs, problems = {}, []
    for p in c["params"]:
        nm = p["name"]
        if nm not in dev: continue
        full = cp.asnumpy(dev[nm]); n = len(host[nm])
        ref = np.empty(len(full), dtype=full.dtype); ref[:n] = host[nm]
        ref[n:] = np.nan if full.dtype == np.float32 else 0x3fffffff
        if full[n:].view(np.uint32).tolist() != ref[n:].view(np.uint32).tolist():
            problems.append(f"write past the end of {nm}")
        if p.get("dir", "in") == "in" and full[:n].view(np.uint32).tolist() != host[nm].view(np.uint32).tolist():
            problems.append(f"input {nm} modified")
        outs[nm] = full[:n]
    return outs, problems, (fn, grd, blk, sh, args)

def tol_vars(r, cname, v, host, scal):
    t = dict(scal); t["eps"] = EPS
    for p in r["contracts"][cname]["params"]:
        if p["type"].startswith("f32") and p.get("dir", "in") == "in":
            a = np.abs(host[p["name"]].astype(np.float64))
            t[p["name"] + "_abs_max"] = float(a.max()) if len(a) else 0.0
            t[p["name"] + "_abs_sum"] = float(a.sum())
    return t

def compare(got, exp, tol, tv):
    got = got.astype(np.float64) if got.dtype == np.float32 else got
    exp = exp.astype(np.float64) if exp.dtype == np.float32 else exp
    if tol.get("exact") or not (tol.get("abs") or tol.get("rel")):
        bad = ~((got == exp) | (np.isnan(got) & np.isnan(exp)))
    else:
        a = ev(tol.get("abs", 0), tv); rl = ev(tol.get("rel", 0), tv)
        with np.errstate(invalid="ignore"):
            ok = (got == exp) | (np.abs(got - exp) <= a + rl * np.abs(exp)) | (np.isnan(got) & np.isnan(exp))
        bad = ~ok
    if bad.any():
        i = int(np.argmax(bad))
        return f"{int(bad.sum())} mismatches, first [{i}] got {got[i]!r} want {exp[i]!r}"
    return None

def outputs_of(r, cname):
    return [p["name"] for p in r["contracts"][cname]["params"] if p["type"].endswith("*") and p.get("dir", "in") != "in"]

# ---- NumPy oracles (f64), by the contract's cpu name ----
from math import erfc
verfc = np.vectorize(erfc)
def gelu(x): return 0.5 * x * verfc(-x / math.sqrt(2))
def conv1d(h, s):
    x = h["in"].astype(np.float64); f = h["conv1d_filter"].astype(np.float64)
    return {"out": np.correlate(np.pad(x, 3), f, "valid")}
def conv2d(h, s):
    R, C = int(s["rows"]), int(s["cols"]); x = np.pad(h["in"].astype(np.float64).reshape(R, C), 1)
    f = h["conv2d_filter"].astype(np.float64).reshape(3, 3); o = np.zeros((R, C))
    for dr in range(3):
        for dc in range(3): o += f[dr, dc] * x[dr:dr + R, dc:dc + C]
    return {"out": o.ravel()}
def attention(h, s):
    b, L, d, causal = int(s["batch"]), int(s["max_len"]), int(s["d"]), int(s["causal"])
    Q, K, V = (h[k].astype(np.float64).reshape(b, L, d) for k in "QKV"); O = np.zeros((b, L, d))
    for bi in range(b):
        l = int(h["seq_lens"][bi])
        for i in range(l):
            nk = i + 1 if causal else l
            sc = K[bi, :nk] @ Q[bi, i] / math.sqrt(d); p = np.exp(sc - sc.max()); p /= p.sum()
            O[bi, i] = p @ V[bi, :nk]
    return {"O": O.ravel()}
def sm(h, s):
    R, C = int(s["rows"]), int(s["cols"]); x = h["in"].astype(np.float64).reshape(R, C)
    e = np.exp(x - x.max(1, keepdims=True)); return {"out": (e / e.sum(1, keepdims=True)).ravel()}
ORACLES = {
    "vector_add": lambda h, s: {"c": (h["a"] + h["b"])},
    "reduce_sum": lambda h, s: {"out": np.array([h["in"].astype(np.float64).sum()])},
    "matmul": lambda h, s: {"C": (h["A"].astype(np.float64).reshape(int(s["M"]), int(s["K"])) @ h["B"].astype(np.float64).reshape(int(s["K"]), int(s["N"]))).ravel()},
    "transpose": lambda h, s: {"out": h["in"].reshape(int(s["rows"]), int(s["cols"])).T.ravel()},
    "softmax_rows": sm,
    "embedding_lookup": lambda h, s: {"out": h["table"].reshape(int(s["vocab"]), int(s["dim"]))[h["ids"]].ravel()},
    "conv1d": conv1d, "conv2d": conv2d,
    "act_relu": lambda h, s: {"y": np.maximum(h["x"], 0)},
    "act_sigmoid": lambda h, s: {"y": 1 / (1 + np.exp(-h["x"].astype(np.float64)))},
    "act_tanh": lambda h, s: {"y": np.tanh(h["x"].astype(np.float64))},
    "act_gelu": lambda h, s: {"y": gelu(h["x"].astype(np.float64))},
    "act_swish": lambda h, s: {"y": h["x"] / (1 + np.exp(-h["x"].astype(np.float64)))},
    "act_mish": lambda h, s: {"y": h["x"] * np.tanh(np.log1p(np.exp(h["x"].astype(np.float64))))},
    "bias_gelu": lambda h, s: {"y": gelu((h["x"].reshape(int(s["rows"]), int(s["cols"])) + h["bias"]).astype(np.float64)).ravel()},
    "gemm_bias_relu": lambda h, s: {"C": np.maximum(h["A"].astype(np.float64).reshape(int(s["M"]), int(s["K"])) @ h["B"].astype(np.float64).reshape(int(s["K"]), int(s["N"])) + h["bias"], 0).ravel()},
    "attention": attention,
}

def time_launch(kargs, reps=20):
    fn, grd, blk, sh, args = kargs
    for _ in range(3): fn(tuple(grd[:3]), tuple(blk[:3]), tuple(args), shared_mem=sh)
    s, e = cp.cuda.Event(), cp.cuda.Event(); ts = []
    for _ in range(reps):
        s.record(); fn(tuple(grd[:3]), tuple(blk[:3]), tuple(args), shared_mem=sh); e.record(); e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e))
    return float(np.median(ts))

def time_fn(f, reps=20):
    for _ in range(3): f()
    s, e = cp.cuda.Event(), cp.cuda.Event(); ts = []
    for _ in range(reps):
        s.record(); f(); e.record(); e.synchronize(); ts.append(cp.cuda.get_elapsed_time(s, e))
    return float(np.median(ts))

COPY = {}
def copy_bw(nbytes):
    # GB/s counting bytes read + written, on a copy that moves nbytes in total.
    n = max(1, nbytes // 8)
    if n not in COPY:
        a = cp.empty(n, dtype=cp.float32); b = cp.empty_like(a)
        t = time_fn(lambda: b.__setitem__(Ellipsis, a))
        COPY[n] = 2 * a.nbytes / (t * 1e-3) / 1e9
    return COPY[n]

def launch_for(r, m, manifest):
    c = r["contracts"][m["contract"]]; l = dict(c["launch"])
    o = (manifest.get("launch") or {}).get(m["kernel"])
    if o: l = {"block": o["block"], "grid": o["grid"], "shared_bytes": o.get("shared_bytes", l.get("shared_bytes"))}
    return l

def grade(lab, r, refmod, src_mod, manifest, oracle, do_perf, label):
    statuses = {}
    for m in r["milestones"]:
        cname = m["contract"]; refk = m.get("reference_kernel") or m["kernel"]
        cases = [c for c in r["cases"]["correctness"] if not m["correctness"].get("cases") or c["name"] in m["correctness"]["cases"]]
        tol = m["correctness"].get("tolerance") or r["contracts"][cname].get("tolerance") or {}
        status = "pass"; notes = []
        if src_mod is None: statuses[m["id"]] = ("fail", "no module"); continue
        try: src_mod.get_function(m["kernel"])
        except Exception: statuses[m["id"]] = ("fail", "missing kernel"); continue
        for ci, case in enumerate(cases):
            v = case["vars"]; host, scal = make_inputs(r, cname, v, 1000 + ci)
            tv = tol_vars(r, cname, v, host, scal)
            ref_out, pr, _ = run_kernel(refmod, refk, r, cname, v, host, scal, r["contracts"][cname]["launch"])
            if pr: notes.append(f"REFERENCE {case['name']}: {pr}")
            if oracle and r["contracts"][cname].get("cpu") in ORACLES:
                want = ORACLES[r["contracts"][cname]["cpu"]](host, scal)
                for o in outputs_of(r, cname):
                    bad = compare(ref_out[o], np.asarray(want[o]), tol, tv)
                    if bad: notes.append(f"REFERENCE vs oracle {case['name']} {o}: {bad}"); status = "fail"
            got, pr, _ = run_kernel(src_mod, m["kernel"], r, cname, v, host, scal, launch_for(r, m, manifest))
            if pr: notes.append(f"{case['name']}: {pr}"); status = "fail"
            for o in outputs_of(r, cname):
                bad = compare(got[o], ref_out[o], tol, tv)
                if bad: notes.append(f"{case['name']} {o}: {bad}"); status = "fail"
        if do_perf and status == "pass":
            for ps in m.get("performance", []):
                case = next(c for c in r["cases"]["performance"] if c["name"] == ps["case"]); v = case["vars"]
                host, scal = make_inputs(r, cname, v, 7)
                _, _, ka = run_kernel(src_mod, m["kernel"], r, cname, v, host, scal, launch_for(r, m, manifest))
                tk = time_launch(ka); ag = ps["against"]
                if ag == "cublas":
                    M, N, K = int(v["M"]), int(v["N"]), int(v["K"])
                    A = cp.random.rand(M, K, dtype=cp.float32); Bm = cp.random.rand(K, N, dtype=cp.float32)
                    val = time_fn(lambda: cp.matmul(A, Bm)) / tk; unit = "x cublas"
                elif ag == "cpu":
                    val = None; unit = f"(cpu: kernel {tk:.4f} ms)"
                elif "reference" in ag:
                    _, _, kr = run_kernel(refmod, ag["reference"], r, cname, v, host, scal, r["contracts"][cname]["launch"])
                    val = time_launch(kr) / tk; unit = f"x ref {ag['reference']}"
                else:
                    by = ev(ag["copy_bandwidth"]["bytes"], {**v, **scal}); bw = copy_bw(int(by))
                    val = 100 * (by / (tk * 1e-3) / 1e9) / bw; unit = f"% of copy bw ({bw:.0f} GB/s)"
                mn = ps.get("min") or max(t["min"] for t in ps["tiers"])
                ok = val is None or val >= mn
                notes.append(f"perf {ps['name']}: {tk:.4f} ms, " + (f"{val:.3f} {unit} (min {mn})" if val is not None else unit))
                if not ok: status = "fail"
        statuses[m["id"]] = (status, "; ".join(notes))
    return statuses

only = sys.argv[1:]
for lab, r in B["rubrics"].items():
    if only and lab not in only: continue
    try:
        refmod = compile_mod(r["reference_src"], lab + ".cu")
        st = grade(lab, r, refmod, refmod, {}, True, True, "reference")
        for k, (s, n) in st.items(): log(f"[{lab}] REFERENCE {k}: {s} | {n}")
    except Exception as e:
        log(f"[{lab}] REFERENCE crashed: {traceback.format_exc()[-1500:]}"); continue
    for name, ex in B["examples"].items():
        if not name.startswith(lab + "/"): continue
        exp = dict(ex["expected"]["milestones"]); exp.update(ex["expected"].get("gpu") or {})
        if "error" in exp.values() or name.endswith("syncthreads_in_branch"):
            log(f"[{name}] skipped on GPU (would hang or is undefined): expected {exp}"); continue
        try:
            mod = compile_mod(ex["src"], os.path.basename(ex["file"]))
        except Exception as e:
            mod = None
        try:
            st = grade(lab, r, refmod, mod, ex["manifest"], False, True, name)
        except Exception as e:
            log(f"[{name}] crashed: {traceback.format_exc()[-800:]}"); continue
        for k, (s, n) in st.items():
            flag = "OK " if s == exp[k] else "MISMATCH"
            log(f"[{name}] {flag} {k}: got {s}, expected {exp[k]} | {n[:600]}")
