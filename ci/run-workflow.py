#!/usr/bin/env python3
"""Run a GitHub Actions workflow's job on this machine, step by step, the way a runner does.

Used by ci/check-templates.sh on the student templates (ci/github/*.yml), where no runner and
no Docker are available. What it does as GitHub does:

- `run:` steps, in order, with `bash --noprofile --norc -eo pipefail` (GitHub's `bash` shell),
  in the repository, with the workflow's and the job's `env:`, and `$GITHUB_ENV`,
  `$GITHUB_PATH`, `$GITHUB_OUTPUT` and `$GITHUB_STEP_SUMMARY` files whose contents take effect
  as on a runner (env and PATH for later steps, `steps.<id>.outputs.*`);
- `${{ }}` expressions and `if:` conditions, with GitHub's status functions (`success()` by
  default, `always()`, `failure()`, `cancelled()`): a step after a failed one runs only if its
  condition says so, and the job fails when a step failed;
- the `uses:` actions the templates use, by what they do on a runner: `actions/checkout` (the
  repository is already checked out), `actions/cache/restore` and `actions/cache/save` (a
  folder per key in --cache-store, immutable once saved, exact-key hits only, outputs
  `cache-hit` and `cache-primary-key`), `actions/upload-artifact` (copies into --artifacts).
  Any other action, and any expression it does not know, is an error, never skipped.

Usage: run-workflow.py WORKFLOW --repo DIR --home DIR --cache-store DIR --artifacts DIR
       [--set NAME=VALUE]... [--report FILE]
--set overrides a workflow-level `env:` value (what a course edits when it copies a template).
Exit status: 0 if the job succeeded, 1 if it failed, 2 on a driver error.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml


class DriverError(Exception):
    pass


# ---- expressions -------------------------------------------------------------------------

TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||!|\(|\)|,)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)*))"
)


def tokenize(text):
    pos, out = 0, []
    text = text.strip()
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise DriverError(f"cannot read expression {text!r} at {text[pos:]!r}")
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class Expr:
    def __init__(self, text, ctx):
        self.toks = tokenize(text)
        self.i = 0
        self.ctx = ctx
        self.text = text

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else (None, None)

    def take(self, value=None):
        tok = self.peek()
        if value is not None and tok[1] != value:
            raise DriverError(f"expected {value!r} in {self.text!r}")
        self.i += 1
        return tok

    def parse(self):
        v = self.or_()
        if self.i != len(self.toks):
            raise DriverError(f"trailing tokens in {self.text!r}")
        return v

    def or_(self):
        v = self.and_()
        while self.peek()[1] == "||":
            self.take()
            r = self.and_()
            v = v if truthy(v) else r
        return v

    def and_(self):
        v = self.cmp()
        while self.peek()[1] == "&&":
            self.take()
            r = self.cmp()
            v = r if truthy(v) else v
        return v

    def cmp(self):
        v = self.unary()
        while self.peek()[1] in ("==", "!="):
            op = self.take()[1]
            r = self.unary()
            same = str(v).lower() == str(r).lower() if isinstance(v, str) or isinstance(r, str) else v == r
            v = same if op == "==" else not same
        return v

    def unary(self):
        if self.peek()[1] == "!":
            self.take()
            return not truthy(self.unary())
        return self.atom()

    def atom(self):
        kind, val = self.take()
        if kind == "str":
            return val[1:-1].replace("''", "'")
        if kind == "num":
            return float(val)
        if val == "(":
            v = self.or_()
            self.take(")")
            return v
        if kind == "name":
            if val in ("true", "false"):
                return val == "true"
            if val == "null":
                return None
            if self.peek()[1] == "(":
                self.take("(")
                self.take(")")
                status = self.ctx["job_status"]
                funcs = {
                    "always": True,
                    "success": status == "success",
                    "failure": status == "failure",
                    "cancelled": False,
                }
                if val not in funcs:
                    raise DriverError(f"unknown function {val}() in {self.text!r}")
                return funcs[val]
            return self.lookup(val)
        raise DriverError(f"unexpected {val!r} in {self.text!r}")

    def lookup(self, path):
        parts = path.split(".")
        root = parts[0]
        if root not in ("env", "steps", "runner", "github"):
            raise DriverError(f"unknown context {root} in {self.text!r}")
        v = self.ctx[root]
        for p in parts[1:]:
            if not isinstance(v, dict):
                return ""
            v = v.get(p, "")
        return v


def truthy(v):
    return v not in (False, None, "", 0)


def evaluate(text, ctx):
    return Expr(text, ctx).parse()


def interpolate(text, ctx):
    if not isinstance(text, str):
        return text

    def one(m):
        v = evaluate(m.group(1), ctx)
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float) and v.is_integer():
            return str(int(v))
        return "" if v is None else str(v)

    return re.sub(r"\$\{\{(.*?)\}\}", one, text)


# ---- actions -----------------------------------------------------------------------------


def paths_of(value, home):
    out = []
    for line in str(value).splitlines():
        line = line.strip()
        if line:
            out.append(os.path.expanduser(line.replace("~", home, 1)) if line.startswith("~") else line)
    return out


def key_dir(store, key):
    return os.path.join(store, re.sub(r"[^A-Za-z0-9._-]", "_", key))


def cache_restore(inputs, opts, log):
    key = inputs["key"]
    src = key_dir(opts.cache_store, key)
    if not os.path.isdir(src):
        log(f"Cache not found for input keys: {key}")
        return {"cache-hit": "", "cache-primary-key": key, "cache-matched-key": ""}
    for i, p in enumerate(paths_of(inputs["path"], opts.home)):
        saved = os.path.join(src, str(i))
        if os.path.exists(saved):
            target = p if os.path.isabs(p) else os.path.join(opts.repo, p)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(saved, target, symlinks=True)
    log(f"Cache restored from key: {key}")
    return {"cache-hit": "true", "cache-primary-key": key, "cache-matched-key": key}


def cache_save(inputs, opts, log):
    key = inputs["key"]
    if not key:
        raise DriverError("actions/cache/save without a key")
    dst = key_dir(opts.cache_store, key)
    if os.path.isdir(dst):
        log(f"Warning: cache already exists for key {key}; not saved again")
        return {}
    tmp = dst + ".partial"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    saved = 0
    for i, p in enumerate(paths_of(inputs["path"], opts.home)):
        source = p if os.path.isabs(p) else os.path.join(opts.repo, p)
        if os.path.isdir(source):
            shutil.copytree(source, os.path.join(tmp, str(i)), symlinks=True)
            saved += 1
    if saved == 0:
        shutil.rmtree(tmp)
        log("Warning: path validation failed: nothing to save")
        return {}
    os.rename(tmp, dst)
    log(f"Cache saved with key: {key}")
    return {}


def upload_artifact(inputs, opts, log):
    name = inputs.get("name", "artifact")
    src = os.path.join(opts.repo, inputs["path"])
    dst = os.path.join(opts.artifacts, name)
    if not os.path.exists(src):
        if inputs.get("if-no-files-found", "warn") == "error":
            raise DriverError(f"no files at {src}")
        log(f"No files were found with the provided path: {inputs['path']}")
        return {}
    shutil.rmtree(dst, ignore_errors=True)
    if os.path.isdir(src):
        shutil.copytree(src, dst)
    else:
        os.makedirs(dst, exist_ok=True)
        shutil.copy(src, dst)
    log(f"Artifact {name} uploaded")
    return {}


ACTIONS = {
    "actions/checkout": lambda inputs, opts, log: {},
    "actions/cache/restore": cache_restore,
    "actions/cache/save": cache_save,
    "actions/upload-artifact": upload_artifact,
}


# ---- the job -----------------------------------------------------------------------------


def read_kv(path):
    """`NAME=value` lines and `NAME<<EOF` blocks, as GitHub reads its command files."""
    out = {}
    if not os.path.exists(path):
        return out
    lines = open(path, encoding="utf-8").read().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delim = line.split("<<", 1)
            body = []
            i += 1
            while i < len(lines) and lines[i] != delim:
                body.append(lines[i])
                i += 1
            out[name] = "\n".join(body)
        elif "=" in line:
            name, value = line.split("=", 1)
            out[name] = value
        i += 1
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workflow")
    ap.add_argument("--repo", required=True)
    ap.add_argument("--home", required=True)
    ap.add_argument("--cache-store", required=True)
    ap.add_argument("--artifacts", required=True)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--report")
    opts = ap.parse_args()
    for d in (opts.home, opts.cache_store, opts.artifacts):
        os.makedirs(d, exist_ok=True)
    wf = yaml.safe_load(open(opts.workflow, encoding="utf-8"))
    env = {k: str(v) for k, v in (wf.get("env") or {}).items()}
    for s in opts.set:
        name, value = s.split("=", 1)
        if name not in env:
            raise DriverError(f"--set {name}: the workflow has no env {name}")
        env[name] = value
    jobs = wf["jobs"]
    if len(jobs) != 1:
        raise DriverError("one job per workflow is supported")
    job_id, job = next(iter(jobs.items()))
    env.update({k: str(v) for k, v in (job.get("env") or {}).items()})
    runner_temp = tempfile.mkdtemp(prefix="runner-")
    files = {
        n: os.path.join(runner_temp, n.lower())
        for n in ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_STEP_SUMMARY")
    }
    for f in files.values():
        open(f, "w").close()
    ctx = {
        "env": env,
        "steps": {},
        "runner": {"os": "Linux", "temp": runner_temp},
        "github": {"ref": "refs/heads/main", "workspace": opts.repo},
        "job_status": "success",
    }
    report = {"job": job_id, "steps": []}
    for n, step in enumerate(job["steps"]):
        name = step.get("name") or step.get("uses") or f"step {n + 1}"
        sid = step.get("id", f"__{n}")
        cond = step.get("if", "success()")
        cond = cond.strip()
        if cond.startswith("${{") and cond.endswith("}}"):
            cond = cond[3:-2]
        run_it = truthy(evaluate(cond, ctx))
        # A condition without a status function implies success() && ... (GitHub's rule).
        if run_it and not re.search(r"\b(always|success|failure|cancelled)\(\)", cond):
            run_it = ctx["job_status"] == "success"
        entry = {"name": name, "id": sid, "ran": run_it, "outcome": "skipped"}
        report["steps"].append(entry)
        ctx["steps"][sid] = {"outputs": {}, "outcome": "skipped", "conclusion": "skipped"}
        if not run_it:
            print(f"--- skipped: {name}", flush=True)
            continue
        print(f"--- {name}", flush=True)
        step_env = dict(env)
        step_env.update({k: interpolate(str(v), ctx) for k, v in (step.get("env") or {}).items()})
        ok = True
        outputs = {}
        if "run" in step:
            script = interpolate(step["run"], ctx)
            out_file = os.path.join(runner_temp, f"output-{n}")
            open(out_file, "w").close()
            path_prefix = [p for p in open(files["GITHUB_PATH"]).read().splitlines() if p]
            proc_env = {
                k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "RUNNER_"))
            }
            proc_env.update(step_env)
            proc_env.update(read_kv(files["GITHUB_ENV"]))
            proc_env.update(
                {
                    "HOME": opts.home,
                    "CI": "true",
                    "GITHUB_ACTIONS": "true",
                    "GITHUB_WORKSPACE": opts.repo,
                    "GITHUB_OUTPUT": out_file,
                    "RUNNER_OS": "Linux",
                    "RUNNER_TEMP": runner_temp,
                    **files,
                }
            )
            proc_env["PATH"] = ":".join(list(reversed(path_prefix)) + [proc_env.get("PATH", "")])
            script_file = os.path.join(runner_temp, f"step-{n}.sh")
            with open(script_file, "w") as f:
                f.write(script)
            rc = subprocess.call(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", script_file],
                cwd=os.path.join(opts.repo, step.get("working-directory", ".")),
                env=proc_env,
            )
            ok = rc == 0
            if not ok:
                print(f"--- {name}: exit code {rc}", flush=True)
            outputs = read_kv(out_file)
        elif "uses" in step:
            action = step["uses"].split("@")[0]
            if action not in ACTIONS:
                raise DriverError(f"the driver does not know the action {step['uses']}")
            inputs = {k: interpolate(str(v), ctx) for k, v in (step.get("with") or {}).items()}
            try:
                outputs = ACTIONS[action](inputs, opts, lambda m: print(f"    {m}", flush=True))
            except (OSError, KeyError) as e:
                print(f"--- {name}: {e}", flush=True)
                ok = False
        else:
            raise DriverError(f"step {name} has neither run nor uses")
        outcome = "success" if ok else "failure"
        entry["outcome"] = outcome
        ctx["steps"][sid] = {"outputs": outputs, "outcome": outcome, "conclusion": outcome}
        if not ok and not step.get("continue-on-error"):
            ctx["job_status"] = "failure"
    report["status"] = ctx["job_status"]
    report["summary"] = open(files["GITHUB_STEP_SUMMARY"]).read()
    shutil.rmtree(runner_temp, ignore_errors=True)
    if opts.report:
        with open(opts.report, "w") as f:
            json.dump(report, f, indent=1)
    print(f"--- job {job_id}: {report['status']}", flush=True)
    return 0 if report["status"] == "success" else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except DriverError as e:
        print(f"run-workflow: {e}", file=sys.stderr)
        sys.exit(2)
