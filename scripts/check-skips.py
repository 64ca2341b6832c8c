#!/usr/bin/env python3
"""Fails a test run that skipped a test it had no leave to skip.

    check-skips.py [--cuda-off] ALLOWLIST JUNIT.xml [JUNIT.xml...]

JUNIT is what `ctest --output-junit` wrote. Every skipped test (CTest's "notrun": a gtest GTEST_SKIP,
a script's exit 77) must match a row of ALLOWLIST (tests/skips.allow) whose condition holds on this
machine (--cuda-off: the tests were built without CUDA, so none can use a GPU); under TESSEL_REQUIRE_GPU=1
no row applies. Prints the allowlist with how many skips each row
took, then every unexpected skip with its message; exits 1 if there is one, 2 on unreadable input.
"""
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET


def has_gpu():
    if not shutil.which("nvidia-smi"):
        return False
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU " in out.stdout


def read_allowlist(path):
    rows = []
    for number, line in enumerate(open(path), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.rstrip("\n").split("\t")
        if len(fields) != 3:
            sys.exit(f"{path}:{number}: want 3 tab-separated fields (name regex, condition, reason), got {len(fields)}")
        pattern, condition, reason = fields
        if condition not in ("no-gpu",):
            sys.exit(f"{path}:{number}: unknown condition '{condition}' (known: no-gpu)")
        try:
            rows.append({"regex": re.compile(pattern), "pattern": pattern, "condition": condition, "reason": reason,
                         "matched": 0})
        except re.error as e:
            sys.exit(f"{path}:{number}: bad regular expression: {e}")
    return rows


def skip_message(case):
    out = case.findtext("system-out") or ""
    m = re.search(r"^SKIP: (.*)$", out, re.M) or re.search(r": Skipped\n(.*)$", out, re.M)
    return m.group(1).strip() if m else "(no message)"


def skipped_tests(paths):
    found = []
    for path in paths:
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError) as e:
            print(f"check-skips: cannot read {path}: {e}", file=sys.stderr)
            sys.exit(2)
        for case in root.iter("testcase"):
            if case.get("status") == "notrun" or case.find("skipped") is not None:
                found.append((case.get("name"), skip_message(case)))
    return found


def main():
    args = sys.argv[1:]
    cuda_off = bool(args) and args[0] == "--cuda-off"
    args = args[1:] if cuda_off else args
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    rows = read_allowlist(args[0])
    require_gpu = os.environ.get("TESSEL_REQUIRE_GPU") == "1"
    gpu = has_gpu() and not cuda_off
    holds = {"no-gpu": not gpu and not require_gpu}
    unexpected = []
    skipped = skipped_tests(args[1:])
    for name, message in skipped:
        row = next((r for r in rows if r["regex"].fullmatch(name) and holds[r["condition"]]), None)
        if row is None:
            unexpected.append((name, message))
        else:
            row["matched"] += 1
    state = "a GPU" if gpu else ("a build without CUDA" if cuda_off else "no GPU")
    print(f"check-skips: {len(skipped)} skipped; this machine has {state}"
          f"{'; TESSEL_REQUIRE_GPU=1: no skip is allowed' if require_gpu else ''}")
    print("check-skips: the allowlist (tests/skips.allow):")
    for r in rows:
        use = f"{r['matched']:3d} skipped" if holds[r["condition"]] else "  - (condition does not hold)"
        print(f"  {use}  [{r['condition']}] {r['pattern']}: {r['reason']}")
    for name, message in unexpected:
        print(f"check-skips: UNEXPECTED SKIP {name}: {message}")
    print(f"check-skips: {len(unexpected)} unexpected skip{'' if len(unexpected) == 1 else 's'}")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
