#!/usr/bin/env bash
# CuPy submissions on a GPU machine: grades every CuPy example (submissions-example/*/cupy_*)
# with --backend cuda and prints one PASS/FAIL line per milestone against its expected.yaml
# (`gpu:` where given, else the emulator's verdict; a milestone `skipped` on the emulator only
# for want of timing must have every non-speed check pass on the GPU), with the measured
# speeds. Then, where the machine's own CuPy imports, it runs the correct examples' kernels with
# real CuPy on fresh inputs against NumPy, which shows that the examples mean on CuPy what
# cugrade graded. Everything goes to OUTDIR/gpu-cupy.log for docs/validation/.
#
# Usage: ci/gpu-cupy.sh BINARY OUTDIR
# Needs: the stripped release binary, python3 (3.10+), NVRTC 13 (the CUDA toolkit's); no Rust,
# no network. cugrade reads CuPy kernels with its own `cupy` stand-in: CuPy itself is only used
# by the cross-check.
set -uo pipefail
bin="$1"; out="$2"
mkdir -p "$out"
log="$out/gpu-cupy.log"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
  "${CUGRADE_NVRTC_CACHE:-$HOME/.cache/cugrade-nvrtc}/nvidia/cu13/lib"; do
  if [ -f "$d/libnvrtc.so.13" ]; then
    export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    break
  fi
done
[ -f /usr/local/cuda/lib64/libcublas.so.13 ] && export LD_LIBRARY_PATH="/usr/local/cuda/lib64:$LD_LIBRARY_PATH"
{
  echo "# cugrade GPU run: CuPy submissions, $(date -u +%Y-%m-%dT%H:%MZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 --version
  python3 -c 'import cupy, numpy; print("cupy", cupy.__version__, "numpy", numpy.__version__)' 2>&1 | tail -1
  "$bin" --version
} 2>&1 | tee "$log"

failures=0
for dir in submissions-example/*/cupy_*; do
  [ -d "$dir" ] || continue
  lab=$(basename "$(dirname "$dir")"); name=$(basename "$dir")
  json="$out/$lab-$name.json"
  "$bin" check --backend cuda --seed 1 --rubric "rubrics/$lab.yaml" "$dir" --json "$json" \
    >"$out/$lab-$name.txt" 2>&1
  code=$?
  lines=$(python3 - "$json" "$dir/expected.yaml" "$lab/$name" "$code" <<'PY'
import json, re, sys
try:
    result = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"FAIL {sys.argv[3]}: no result.json (exit {sys.argv[4]}): {e}")
    sys.exit(0)
want, section = {"milestones": {}, "gpu": {}}, None
for line in open(sys.argv[2]):
    line = line.split("#")[0].rstrip()
    if re.match(r"^\w", line):
        section = line.rstrip(":") if line.endswith(":") else None
    elif section in want and ":" in line:
        k, v = line.strip().split(":", 1)
        want[section][k.strip()] = v.strip()
for m in result["milestones"]:
    got = m["status"]
    speeds = ", ".join(
        f'{c["name"]}={c.get("measured")}' for c in m["checks"] if c["kind"] == "performance"
    )
    exp = want["gpu"].get(m["id"]) or want["milestones"].get(m["id"])
    ok, why = True, ""
    if exp == "skipped":
        wrong = [c for c in m["checks"] if c["kind"] != "performance" and c["status"] != "pass"]
        if wrong:
            ok, why = False, f' -- {wrong[0]["name"]}: {wrong[0]["message"][:160]}'
    elif exp != got:
        bad = [c for c in m["checks"] if c["status"] not in ("pass", "skipped")]
        ok = False
        why = f' -- {bad[0]["name"]}: {bad[0]["message"][:160]}' if bad else ""
    print(f'{"PASS" if ok else "FAIL"} {sys.argv[3]} {m["id"]}={got} (expected {exp})'
          + (f" [{speeds}]" if speeds else "") + why)
PY
)
  echo "$lines" | tee -a "$log"
  grep -q '^FAIL' <<<"$lines" && failures=$((failures + 1))
  [ -z "$lines" ] && failures=$((failures + 1))
done

echo | tee -a "$log"
echo "## the correct examples' kernels with the machine's CuPy, against NumPy" | tee -a "$log"
python3 - <<'PY' 2>&1 | tee -a "$log" | tee "$out/cupy-crosscheck.txt"
import importlib.util, math, sys
try:
    import cupy as cp
    import numpy as np
except Exception as e:
    print(f"SKIP real CuPy does not import: {e}")
    sys.exit(0)

def load(path):
    spec = importlib.util.spec_from_file_location("m_" + path.replace("/", "_")[:-3], path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m

rng = np.random.default_rng(1)
def report(name, ok, detail=""):
    print(f'{"PASS" if ok else "FAIL"} cupy {name} {detail}')

n = 100003
a = rng.uniform(-1000, 1000, n).astype(np.float32)
b = rng.uniform(-1000, 1000, n).astype(np.float32)
for ex in ("cupy_raw", "cupy_elementwise"):
    try:
        k = load(f"submissions-example/vector-add/{ex}/vector_add.py").vector_add
        da, db = cp.asarray(a), cp.asarray(b)
        if isinstance(k, cp.RawKernel):
            dc = cp.empty_like(da)
            k(((n + 255) // 256,), (256,), (da, db, dc, np.int32(n)))
        else:
            dc = k(da, db)
        report(f"vector-add/{ex}", bool((cp.asnumpy(dc) == a + b).all()))
    except Exception as e:
        report(f"vector-add/{ex}", False, repr(e)[:200])

x = rng.integers(-8, 9, 1 << 20).astype(np.float32)
want = float(x.astype(np.float64).sum())
for ex, names in (("cupy_raw", ("reduce_naive", "reduce_shared", "reduce_shuffle")),
                  ("cupy_reduction_kernel", ("reduce_naive", "reduce_shared", "reduce_shuffle"))):
    try:
        m = load(f"submissions-example/reduction/{ex}/reduce.py")
        for nm in names:
            k = getattr(m, nm)
            dx = cp.asarray(x)
            if isinstance(k, cp.ReductionKernel):
                got = float(k(dx))
            else:
                out = cp.zeros(1, dtype=cp.float32)
                k(((x.size + 255) // 256,), (256,), (dx, out, np.int32(x.size)))
                got = float(out[0])
            report(f"reduction/{ex} {nm}", got == want, f"got {got} want {want}")
    except Exception as e:
        report(f"reduction/{ex}", False, repr(e)[:200])

try:
    m = load("submissions-example/activations/cupy_elementwise/act.py")
    xs = rng.uniform(-10, 10, 4099).astype(np.float32)
    ref = {
        "act_relu": np.maximum(xs, 0),
        "act_sigmoid": 1 / (1 + np.exp(-xs.astype(np.float64))),
        "act_tanh": np.tanh(xs.astype(np.float64)),
        "act_swish": xs / (1 + np.exp(-xs.astype(np.float64))),
        "act_mish": xs * np.tanh(np.log1p(np.exp(xs.astype(np.float64)))),
        "act_gelu": 0.5 * xs * (1 + np.array([math.erf(v / math.sqrt(2)) for v in xs.astype(np.float64)])),
    }
    for nm, r in ref.items():
        got = cp.asnumpy(getattr(m, nm)(cp.asarray(xs))).astype(np.float64)
        err = float(np.max(np.abs(got - r)) / max(float(np.max(np.abs(r))), 1e-30))
        report(f"activations/cupy_elementwise {nm}", err < 1e-5, f"max err relative to the largest value {err:.2e}")
    rows, cols = 37, 129
    xm = rng.uniform(-4, 4, (rows, cols)).astype(np.float32)
    bias = rng.uniform(-1, 1, cols).astype(np.float32)
    v = (xm + bias).astype(np.float64)
    r = 0.5 * v * (1 + np.vectorize(math.erf)(v / math.sqrt(2)))
    got = cp.asnumpy(m.bias_gelu(cp.asarray(xm), cp.asarray(bias))).astype(np.float64)
    err = float(np.max(np.abs(got - r)) / max(float(np.max(np.abs(r))), 1e-30))
    report("activations/cupy_elementwise bias_gelu (bias row broadcast)", err < 1e-5, f"max err relative to the largest value {err:.2e}")
except Exception as e:
    report("activations/cupy_elementwise", False, repr(e)[:200])
PY
cross=$(grep -c "^FAIL cupy" "$out/cupy-crosscheck.txt" 2>/dev/null); cross=${cross:-0}
echo "cupy examples with unexpected verdicts: $failures; real-CuPy cross-check failures: $cross" | tee -a "$log"
[ "$failures" -eq 0 ] && [ "$cross" -eq 0 ]
