#!/usr/bin/env python3
"""A symbolic link planted at every name Tessel creates in the spill, checkpoint and output directories.

    planted_links.py TESSEL WORK

The names come from the code, not from a list: one run of a job that writes all three (an offloading GPT,
checkpoints, a targets file) is traced with strace(1), and every file or directory it creates under them
(open with O_CREAT, mkdir, the destination of a rename) is a name to plant at. The runs go in a PID
namespace of their own (unshare --pid), so that names carrying the pid (spill files, temporaries) are the
same in every run. Then, for each name, the directories are laid anew with a link at that name pointing
outside (at a file, or a directory for names the run makes directories of), and the job is run again:
it must exit 6 naming the path (a name below weights/, which only an earlier run makes, is planted
in what looks like an earlier run: that run's directory is searched for links before anything else),
and nothing outside may have been written. Prints a table; exits 1
naming each name that was followed, written through, or not refused.
"""
import json
import os
import re
import shutil
import subprocess
import sys

TESSEL, WORK = sys.argv[1], os.path.abspath(sys.argv[2])
ROOTS = {"out": os.path.join(WORK, "out"), "spill": os.path.join(WORK, "spill"), "ckpt": os.path.join(WORK, "ckpt")}
SOURCE = os.environ.get("TESSEL_SOURCE_DIR", os.getcwd())
JOB = os.path.join(SOURCE, "jobs/examples/gpt-demo.toml")
SETS = ["train.steps=4", "train.warmup_steps=1", "model.layers=1", "model.hidden=64", "spill.policy=offload",
        f"spill.dir={ROOTS['spill']}", "checkpoint.every_steps=2", "checkpoint.keep=1",
        f"checkpoint.dir={ROOTS['ckpt']}", f"job.output_dir={ROOTS['out']}", "metrics.port_base=0",
        "train.val_every=0", "resources.threads_per_worker=1"]
VICTIM_FILE = os.path.join(WORK, "victim.txt")
VICTIM_DIR = os.path.join(WORK, "victim-dir")


def command(trace):
    args = []
    for s in SETS:
        args += ["--set", s]
    return ["unshare", "--pid", "--fork", "--mount-proc", "strace", "-f", "-qq", "-o", trace,
            "-e", "trace=openat,open,creat,mkdir,mkdirat,rename,renameat,renameat2", TESSEL, "run", JOB] + args


def fresh():
    for d in ROOTS.values():
        shutil.rmtree(d, ignore_errors=True)
    shutil.rmtree(VICTIM_DIR, ignore_errors=True)
    os.makedirs(VICTIM_DIR, mode=0o700)
    with open(VICTIM_FILE, "w") as f:
        f.write("precious\n")


def relative(path):
    for key, root in ROOTS.items():
        if path.startswith(root + "/"):
            return key, path[len(root) + 1:]
    return None


def created_names(trace):
    """(root, relative name, is_dir) for everything the traced run created under the roots."""
    names = {}
    for line in open(trace):
        m = re.search(r'(openat|open|creat)\((?:AT_FDCWD, )?"([^"]+)", ([A-Z_|]+)[^)]*\)\s+=\s+(\d+)', line)
        if m and "O_CREAT" in m.group(3):
            r = relative(m.group(2))
            if r:
                names.setdefault(r, False)
            continue
        m = re.search(r'mkdir(?:at)?\((?:AT_FDCWD, )?"([^"]+)", [0-7]+\)\s+=\s+0', line)
        if m:
            r = relative(m.group(1))
            if r:
                names[r] = True
            continue
        m = re.search(r'rename(?:at2?)?\((?:AT_FDCWD, )?"([^"]+)", (?:AT_FDCWD, )?"([^"]+)"', line)
        if m and "= 0" in line:
            r = relative(m.group(2))
            if r:
                names.setdefault(r, False)
    return names


def outside_untouched():
    with open(VICTIM_FILE, "rb") as f:
        if f.read() != b"precious\n":
            return "the victim file was overwritten"
    if os.listdir(VICTIM_DIR):
        return f"files were written into the victim directory: {os.listdir(VICTIM_DIR)}"
    return ""


def main():
    os.makedirs(WORK, exist_ok=True)
    fresh()
    trace = os.path.join(WORK, "trace")
    done = subprocess.run(command(trace), capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stderr[-3000:], file=sys.stderr)
        print("the traced run failed", file=sys.stderr)
        return 1
    names = created_names(trace)
    need = {("spill", "gpt-demo-w0"), ("ckpt", "step-2"), ("out", "summary.json"), ("out", "metrics.csv")}
    seen = {(k, n.split(".")[0] if k == "spill" else n.split("/")[0]) for k, n in names}
    missing = [f"{k}/{n}" for k, n in need if (k, n) not in seen]
    if missing:
        print(f"the traced run created none of {missing}: the enumeration is broken", file=sys.stderr)
        return 1
    problems, rows = [], []
    for (key, name), is_dir in sorted(names.items()):
        fresh()
        target = os.path.join(ROOTS[key], name)
        for d in ROOTS.values():
            os.makedirs(d, mode=0o700, exist_ok=True)
        os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
        os.symlink(VICTIM_DIR if is_dir else VICTIM_FILE, target)
        run = subprocess.run(command("/dev/null"), capture_output=True, text=True, errors="replace")
        harm = outside_untouched()
        named = target in run.stderr
        expected = 6
        verdict = "ok" if run.returncode == expected and named and not harm else "FAIL"
        rows.append((f"{key}/{name}", "dir" if is_dir else "file", run.returncode, "yes" if named else "no", harm or "-"))
        if verdict == "FAIL":
            last = [l for l in run.stderr.splitlines() if "error" in l][-1:] or run.stderr.splitlines()[-1:]
            problems.append(f"{key}/{name}: exit {run.returncode}, path named: {named}, {harm or 'nothing outside written'}"
                            f"; {last[0] if last else ''}")
    print(f"{'planted at':64} {'kind':5} {'exit':>4} {'named':>5}  outside")
    for r in rows:
        print(f"{r[0]:64} {r[1]:5} {r[2]:4} {r[3]:>5}  {r[4]}")
    if problems:
        print(f"{len(problems)} of {len(rows)} names from the trace not refused")
    else:
        print(f"{len(rows)} names from the trace, all refused with exit 6 naming the link; nothing written outside")
    with open(os.path.join(WORK, "planted_links.json"), "w") as f:
        json.dump({"rows": rows, "problems": problems}, f, indent=1)
    for p in problems:
        print("PROBLEM:", p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
