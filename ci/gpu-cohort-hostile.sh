#!/usr/bin/env bash
# A hostile cohort graded on the GPU (issue 17, parsing and cohort half), with a prebuilt binary,
# run from the repository root (it reads rubrics/vector-add.yaml and submissions-example/):
#   1. one student handing in alice.cu, alice/, alice.zip and alice.tar.gz, a folder named
#      summary.md, a link eve.cu -> /etc/passwd, a manifest with 10,000 nested parentheses, a
#      2 MiB manifest of nested [ ], and a 3 MB .tar.gz whose GNU long-name header claims 3 GiB:
#      `grade --backend cuda --jobs 2` exits 1 in well under its deadline, every entry has its
#      own row and folder, the hostile ones are errors of their own student, the grader's peak
#      RSS (VmHWM) stays under 1 GiB, and no byte of /etc/passwd reaches the outputs;
#   2. `--resume` reuses the graded students and finishes;
#   3. a second `grade` into a folder another run is writing exits 2 at once.
# Usage: ci/gpu-cohort-hostile.sh BINARY OUTDIR   (prints PASS/FAIL lines; exit 1 on any FAIL)
# CUGRADE_BACKEND=emu runs the same on a machine without a GPU.
set -uo pipefail
backend=${CUGRADE_BACKEND:-cuda}
bin=$(realpath "$1"); out=$(realpath -m "$2")
mkdir -p "$out"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib $(dirname "$(find / -name 'libnvrtc.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)" 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
bad=0
say() { echo "$1 $2"; [ "$1" = PASS ] || bad=1; }
rubric=rubrics/vector-add.yaml
good=submissions-example/vector-add/naive/vector_add.cu
[ -f "$rubric" ] && [ -f "$good" ] || { echo "FAIL run me from the repository root"; exit 1; }

python3 - "$work/cohort" "$good" <<'PY'
import gzip, io, os, sys, tarfile, zipfile
cohort, good = sys.argv[1], open(sys.argv[2]).read()
wrong = good.replace("a[i] + b[i]", "a[i] + b[i] + 1.0f") + "// WRONG\n"
assert wrong != good + "// WRONG\n", "the example's kernel changed"
os.makedirs(cohort)
def folder(name, files):
    os.makedirs(os.path.join(cohort, name))
    for n, t in files.items():
        open(os.path.join(cohort, name, n), "w").write(t)
open(os.path.join(cohort, "alice.cu"), "w").write(good)
folder("alice", {"vector_add.cu": wrong})
with zipfile.ZipFile(os.path.join(cohort, "alice.zip"), "w") as z:
    z.writestr("vector_add.cu", good)
with tarfile.open(os.path.join(cohort, "alice.tar.gz"), "w:gz") as t:
    data = wrong.encode(); ti = tarfile.TarInfo("vector_add.cu"); ti.size = len(data)
    t.addfile(ti, io.BytesIO(data))
folder("summary.md", {"vector_add.cu": good})
os.symlink("/etc/passwd", os.path.join(cohort, "eve.cu"))
folder("parens", {"vector_add.cu": good,
                  "cugrade.yaml": 'launch:\n  vector_add:\n    grid: ["' + "(" * 10000 + "n" + ")" * 10000 + '"]\n'})
folder("brackets", {"vector_add.cu": good,
                    "cugrade.yaml": "student: " + "[" * (1 << 20) + "]" * ((1 << 20) - 20) + "\n"})
# A GNU long-name header claiming 3 GiB, then 3 GiB of 'a' as 192 gzip members of 16 MiB.
h = bytearray(512); h[:13] = b"././@LongLink"
h[100:108] = b"0000644\0"; h[108:116] = b"0000000\0"; h[116:124] = b"0000000\0"
h[124:136] = ("%011o" % (3 << 30)).encode() + b"\0"; h[136:148] = b"00000000000\0"
h[156:157] = b"L"; h[257:265] = b"ustar  \0"; h[148:156] = b" " * 8
h[148:156] = ("%06o" % sum(h)).encode() + b"\0 "
chunk = gzip.compress(b"a" * (16 << 20), 9)
with open(os.path.join(cohort, "longname.tar.gz"), "wb") as f:
    f.write(gzip.compress(bytes(h), 9))
    for _ in range(192):
        f.write(chunk)
PY

# Run the grader, polling its VmHWM (the grader's own peak RSS, not its workers').
cat > "$work/run.py" <<'PY'
import subprocess, sys, time
out_log, args = sys.argv[1], sys.argv[2:]
p = subprocess.Popen(args, stdout=open(out_log, "w"), stderr=subprocess.STDOUT)
hwm, started = 0, time.time()
while p.poll() is None:
    try:
        for line in open(f"/proc/{p.pid}/status"):
            if line.startswith("VmHWM:"):
                hwm = max(hwm, int(line.split()[1]))
    except OSError:
        pass
    if time.time() - started > 560:
        p.kill()
    time.sleep(0.05)
print(p.returncode, hwm // 1024, round(time.time() - started, 1))
PY
read -r code hwm wall < <(python3 "$work/run.py" "$out/grade.log" "$bin" grade --backend "$backend" --jobs 2 --seed 7 \
  --rubric "$rubric" "$work/cohort" --out "$work/out")
echo "grade: exit $code, grader VmHWM ${hwm} MB, ${wall} s"
cp -r "$work/out" "$out/out" 2>/dev/null
[ "$code" = 1 ] && say PASS "hostile cohort graded: exit 1" || say FAIL "hostile cohort: exit $code (see $out/grade.log)"
[ "$hwm" -lt 1024 ] && say PASS "grader peak RSS ${hwm} MB < 1 GiB" || say FAIL "grader peak RSS ${hwm} MB"
python3 - "$work/out" <<'PY'
import csv, os, sys
out = sys.argv[1]
rows = {r["id"]: r for r in csv.DictReader(open(os.path.join(out, "grades.csv")))}
def report(i): return open(os.path.join(out, "students", i, "report.md")).read()
ok = True
def check(cond, what):
    global ok
    print(("PASS " if cond else "FAIL ") + what)
    ok &= bool(cond)
check(len(rows) == 9, f"9 rows, one per entry: {sorted(rows)}")
check(all(rows[i]["student"] == "alice" for i in ["alice.cu", "alice", "alice.zip", "alice.tar.gz"]), "four alice rows told apart by id")
check(rows["alice.cu"]["status"] in ("pass", "skipped") and rows["alice.zip"]["status"] in ("pass", "skipped"), "alice.cu and alice.zip graded correct")
check(rows["alice"]["status"] == "fail" and rows["alice.tar.gz"]["status"] == "fail", "alice/ and alice.tar.gz graded wrong")
check(os.path.isfile(os.path.join(out, "summary.md")) and "summary.md" in rows, "a folder named summary.md is a student; summary.md is the report")
check(rows["eve.cu"]["status"] == "error" and "symbolic link" in report("eve.cu"), "eve.cu -> /etc/passwd refused")
check(rows["parens"]["status"] == "error" and "at most 1024" in report("parens"), "10,000 nested parentheses: that student's error")
check(rows["brackets"]["status"] == "error" and "a cugrade.yaml may have at most" in report("brackets"), "2 MiB nested manifest: that student's error")
check(rows["longname.tar.gz"]["status"] == "error" and "GNU long name of 3221225472 bytes" in report("longname.tar.gz"), "3 GiB long-name header refused")
leak = [os.path.join(d, f) for d, _, fs in os.walk(out) for f in fs if "root:x:0:0" in open(os.path.join(d, f), errors="replace").read()]
check(not leak, f"no line of /etc/passwd in the outputs {leak}")
sys.exit(0 if ok else 1)
PY
[ $? -eq 0 ] || bad=1

read -r code hwm wall < <(python3 "$work/run.py" "$out/resume.log" "$bin" grade --backend "$backend" --jobs 2 --seed 7 --resume \
  --rubric "$rubric" "$work/cohort" --out "$work/out")
grep -q "reused from the previous run" "$out/resume.log" && [ "$code" = 1 ] \
  && say PASS "--resume: $(grep -o '([0-9]* reused[^)]*)' "$out/resume.log")" || say FAIL "--resume: exit $code (see $out/resume.log)"

# Two runs into one folder: the second stops at once.
"$bin" grade --backend "$backend" --jobs 1 --rubric "$rubric" "$work/cohort" --out "$work/out2" > "$out/first.log" 2>&1 &
first=$!
for _ in $(seq 600); do [ -d "$work/out2/students" ] && break; sleep 0.05; done
"$bin" grade --backend "$backend" --rubric "$rubric" "$work/cohort" --out "$work/out2" > "$out/second.log" 2>&1
code=$?
[ $code -eq 2 ] && grep -q "another cugrade run is writing into" "$out/second.log" \
  && say PASS "second grade into the same folder: exit 2" || say FAIL "second grade: exit $code (see $out/second.log)"
wait $first
exit $bad
