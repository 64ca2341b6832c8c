#!/usr/bin/env python3
"""The checks of tests/cluster/prometheus_live.sh against a live Prometheus (standard library only).

  prometheus_live.py panels PROM_URL DASHBOARD JOB_REGEX START TIMEOUT
      Every query of every panel of the Grafana dashboard returns data over [START, now] (range queries with
      $job = JOB_REGEX and $rank = .*). Retries until TIMEOUT seconds have passed, then names the panels
      without data. Queries of tessel_gpu_* (set only by workers on a GPU) are left out and named.
  prometheus_live.py catalog METRICS_MD URL...
      The metric families the exporters at URL... serve are exactly the catalog's, each with its documented
      labels (histograms' `le` aside): none missing, none extra.
  prometheus_live.py rules PROM_URL
      Every rule Prometheus loaded is healthy (evaluated without error).
  prometheus_live.py alert PROM_URL ALERT JOB START TIMEOUT [LABEL=VALUE...]
      The alert fired for that job (ALERTS{alertstate="firing"} since START), within TIMEOUT seconds.
  prometheus_live.py value PROM_URL QUERY TIMEOUT MIN
      The instant query returns a sample >= MIN within TIMEOUT seconds; prints it.
  prometheus_live.py trained PROM_URL JOB START SUMMARY_JSON
      What Prometheus scraped of a finished job is what it trained: every scrape of each rank's
      tessel_epoch and tessel_loss, paired by timestamp, gives a step the job ran and that step's loss in
      SUMMARY_JSON (or the next step's: a scrape may fall between the two updates), and every step the job
      had finished 3 s before its end (its metrics.csv, beside SUMMARY_JSON) was scraped.
"""
import csv
import json
import os
import re
import sys
import time
import urllib.parse
import urllib.request


def api(prom, path, **params):
    url = f"{prom}/api/v1/{path}?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"{url}: {body}")
    return body["data"]


def panels(prom, dashboard_path, job_regex, start, timeout):
    dashboard = json.load(open(dashboard_path))
    queries = []  # (panel title, refId, expr)

    def walk(ps):
        for p in ps:
            if p.get("type") != "row":
                for t in p.get("targets", []):
                    expr = t.get("expr", "").replace("$job", job_regex).replace("$rank", ".*")
                    queries.append((p.get("title"), t.get("refId"), expr))
            walk(p.get("panels", []))

    walk(dashboard["panels"])
    # The live runs compute on the CPU: the GPU panels (tessel_gpu_*, "when set (GPU)") have nothing to show.
    gpu = [q for q in queries if "tessel_gpu_" in q[2]]
    queries = [q for q in queries if q not in gpu]
    if gpu:
        print(f"not queried (GPU workers only): {', '.join(sorted({f'{t} {r}' for t, r, _ in gpu}))}")
    deadline = time.time() + timeout
    missing = queries
    while True:
        still = []
        for title, ref, expr in missing:
            data = api(prom, "query_range", query=expr, start=start, end=time.time(), step="2s")
            if not any(series.get("values") for series in data["result"]):
                still.append((title, ref, expr))
        missing = still
        if not missing or time.time() > deadline:
            break
        time.sleep(3)
    for title, ref, expr in missing:
        print(f"panel '{title}' query {ref} returned no data: {expr}")
    if missing:
        return 1
    print(f"every one of the {len(queries)} queries of {len({q[0] for q in queries})} panels returned data")
    return 0


def parse_catalog(path):
    rows = {}
    lines = open(path, encoding="utf-8").read().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("| name | type |"):
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                cells = [c.strip() for c in row.strip().strip("|").split("|")]
                rows[cells[0].strip("`")] = (cells[1], {x.strip() for x in cells[2].split(",") if x.strip()},
                                             cells[5])
            break
    return rows


def catalog(md, urls):
    want = parse_catalog(md)
    served = {}  # family -> (type, label names)
    for url in urls:
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
        for name, kind in types.items():
            served.setdefault(name, [kind, set()])
        for m in re.finditer(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? \S+", text, re.M):
            name, labels = m.group(1), m.group(2) or ""
            family = name if name in types else re.sub(r"_(bucket|sum|count)$", "", name)
            if family not in served:
                served[family] = ["untyped", set()]
            served[family][1].update(l.split("=")[0] for l in re.findall(r'(\w+)="', labels) if l != "le")
    problems = []
    # The live runs compute on the CPU: what only a GPU worker sets ("when set (GPU)") may be missing.
    for name in sorted(set(want) - set(served)):
        if "(GPU)" not in want[name][2]:
            problems.append(f"{name}: in METRICS.md but served by no rank")
    for name in sorted(set(served) - set(want)):
        problems.append(f"{name}: served but not in METRICS.md")
    for name in sorted(set(want) & set(served)):
        kind, labels, _ = want[name]
        if served[name][0] != kind:
            problems.append(f"{name}: served as a {served[name][0]}, documented as a {kind}")
        if served[name][1] != labels:
            problems.append(f"{name}: served with labels {sorted(served[name][1])}, documented {sorted(labels)}")
    for p in problems:
        print(p)
    if problems:
        return 1
    gpu_only = sorted(n for n in set(want) - set(served) if "(GPU)" in want[n][2])
    print(f"the {len(urls)} exporters serve exactly the {len(want) - len(gpu_only)} cataloged metrics, with their "
          f"documented labels" + (f" (not the {len(gpu_only)} of a GPU worker: {', '.join(gpu_only)})" if gpu_only else ""))
    return 0


def rules(prom):
    data = api(prom, "rules")
    bad, n = [], 0
    for group in data["groups"]:
        for rule in group["rules"]:
            n += 1
            if rule.get("health") != "ok" or rule.get("lastError"):
                bad.append(f"rule {rule.get('name')}: health {rule.get('health')}, error {rule.get('lastError')!r}")
    for b in bad:
        print(b)
    if bad or n == 0:
        print(f"{len(bad)} unhealthy of {n} rules")
        return 1
    print(f"all {n} rules healthy")
    return 0


def alert(prom, name, job, start, timeout, extra):
    matchers = [f'alertname="{name}"', 'alertstate="firing"', f'job="{job}"']
    matchers += [f'{k}="{v}"' for k, v in (e.split("=", 1) for e in extra)]
    query = "ALERTS{" + ", ".join(matchers) + "}"
    deadline = time.time() + timeout
    while True:
        data = api(prom, "query_range", query=query, start=start, end=time.time(), step="1s")
        if data["result"]:
            first = min(float(v[0]) for s in data["result"] for v in s["values"])
            labels = data["result"][0]["metric"]
            print(f"{name} fired for job {job} {first - float(start):.0f} s after the drill began: "
                  + ", ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k not in ("__name__", "alertstate")))
            return 0
        if time.time() > deadline:
            print(f"{name} did not fire for job {job} within {timeout} s ({query})")
            return 1
        time.sleep(1)


def value(prom, query, timeout, minimum):
    deadline = time.time() + timeout
    while True:
        data = api(prom, "query", query=query)
        vals = [float(r["value"][1]) for r in data["result"]]
        if vals and max(vals) >= minimum:
            print(f"{query} = {max(vals):.3g}")
            return 0
        if time.time() > deadline:
            print(f"{query}: {vals} never reached {minimum} within {timeout} s")
            return 1
        time.sleep(1)


def trained(prom, job, start, summary_path):
    summary = json.load(open(summary_path))
    unit = "step" if "step_loss" in summary else "epoch"
    losses = summary[f"{unit}_loss"]
    last = summary.get(f"stopped_after_{unit}", len(losses))
    series = {}
    for name in ("tessel_epoch", "tessel_loss"):
        data = api(prom, "query_range", query=f'{name}{{job="{job}",role!="coordinator"}}', start=start,
                   end=time.time(), step="1s")
        for r in data["result"]:
            series.setdefault(r["metric"]["rank"], {})[name] = {float(t): float(v) for t, v in r["values"]}
    problems, pairs, newest = [], 0, 0
    for rank, got in sorted(series.items()):
        epochs, loss = got.get("tessel_epoch", {}), got.get("tessel_loss", {})
        for t, step in sorted(epochs.items()):
            step = int(step)
            if step < 1 or t not in loss:
                continue
            pairs += 1
            newest = max(newest, step)
            if step > len(losses):
                problems.append(f"rank {rank} at {t:.0f}: {unit} {step}, but the job ran {len(losses)}")
                continue
            want = [losses[step - 1]] + ([losses[step]] if step < len(losses) else [])
            if not any(loss[t] == w or abs(loss[t] - w) <= 1e-12 * abs(w) for w in want):
                problems.append(f"rank {rank} {unit} {step}: Prometheus has loss {loss[t]!r}, summary.json {want}")
    # The last scrape comes at most one scrape interval (1 s) before the job's end, which may be many
    # steps of a fast job: what metrics.csv says the job had finished 3 s before its last row must have
    # been scraped.
    rows = [(float(r["unix_seconds"]), int(r["step"])) for r in csv.DictReader(open(os.path.join(os.path.dirname(summary_path), "metrics.csv")))]
    end = max(t for t, _ in rows)
    floor = max([step for t, step in rows if t <= end - 3] or [0])
    if pairs == 0:
        problems.append(f"no scrape of job {job} paired tessel_epoch with tessel_loss")
    elif newest < floor:
        problems.append(f"the last {unit} scraped is {newest}, but the job had run {floor} of its {last} 3 s before it ended")
    for p in problems[:10]:
        print(p)
    if problems:
        return 1
    print(f"{job}: {pairs} scrapes of tessel_epoch and tessel_loss over {len(series)} ranks agree with "
          f"summary.json (last {unit} scraped {newest} of {last})")
    return 0


def main(argv):
    cmd = argv[1]
    if cmd == "panels":
        return panels(argv[2], argv[3], argv[4], argv[5], float(argv[6]))
    if cmd == "catalog":
        return catalog(argv[2], argv[3:])
    if cmd == "rules":
        return rules(argv[2])
    if cmd == "alert":
        return alert(argv[2], argv[3], argv[4], argv[5], float(argv[6]), argv[7:])
    if cmd == "value":
        return value(argv[2], argv[3], float(argv[4]), float(argv[5]))
    if cmd == "trained":
        return trained(argv[2], argv[3], argv[4], argv[5])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
