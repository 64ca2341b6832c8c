#!/usr/bin/env python3
"""Checks that a Grafana dashboard (and optionally Prometheus rule files) query only cataloged metrics.

The catalog is the table in monitoring/METRICS.md whose header starts with "| name | type |". Checks:
  - the dashboard is valid JSON;
  - every panel other than a row has at least one query, and every query names at least one metric;
  - every metric a query names is in the catalog (a histogram only as _bucket, _sum or _count);
  - every catalog metric appears on some panel;
  - every $variable a query uses is defined in templating;
  - with --rules: every `expr:` in the rule files names only catalog metrics (and `up`);
  - with --rule-tests: every alert of the rule files has a promtool unit test there that expects it to fire.
Exits 0 when all hold. Otherwise it prints one line per problem, then "N problems", and exits 1.
Only the standard library is used: PyYAML is not assumed.
"""
import argparse
import json
import re
import sys

# Words that may stand where a metric name would, but are not metrics.
KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
    "offset", "atan2", "inf", "nan", "start", "end",
}
GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
IDENTIFIER = re.compile(r"(?<![\w.:$])[a-zA-Z_:][a-zA-Z0-9_:]*")
GRAFANA_BUILTINS = {"__interval", "__interval_ms", "__rate_interval", "__range", "__range_s", "__range_ms",
                    "__from", "__to", "__dashboard", "__name", "__org", "__user", "timeFilter"}


def parse_catalog(path):
    """Returns {metric name: type} from the catalog table of METRICS.md."""
    catalog = {}
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("| name | type |"):
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                cells = [c.strip() for c in row.strip().strip("|").split("|")]
                catalog[cells[0].strip("`")] = cells[1]
            break
    if not catalog:
        sys.exit(f"{path}: no catalog table (a header row starting with '| name | type |')")
    return catalog


def metric_names(expr):
    """The metric names a PromQL expression selects (Grafana variables allowed)."""
    text = re.sub(r"\$\{[^}]*\}|\$\w+|\[\[\w+\]\]", "", expr)  # Grafana variables
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', text)  # string literals
    text = re.sub(r"\{[^{}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\[\]]*\]", " ", text)  # ranges and subqueries
    text = GROUPING.sub(" ", text)
    names = []
    for match in IDENTIFIER.finditer(text):
        word = match.group(0)
        rest = text[match.end():].lstrip()
        if rest.startswith("("):  # a function or an aggregation
            continue
        if word.lower() in KEYWORDS:
            continue
        names.append(word)
    return names


def variables_used(expr):
    return {a or b for a, b in re.findall(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", expr)}


def check_names(names, catalog, allowed_extra, where, problems):
    for name in names:
        if name in allowed_extra:
            continue
        if name in catalog:
            if catalog[name] == "histogram":
                problems.append(f"{where}: histogram {name} queried without _bucket, _sum or _count")
            continue
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if base != name and catalog.get(base) == "histogram":
            continue
        problems.append(f"{where}: unknown metric {name} (not in METRICS.md)")


def base_name(name, catalog):
    base = re.sub(r"_(bucket|sum|count)$", "", name)
    return base if catalog.get(base) == "histogram" else name


def iter_panels(panels):
    for panel in panels:
        yield panel
        yield from iter_panels(panel.get("panels", []))  # panels inside collapsed rows


def check_dashboard(path, catalog, problems):
    try:
        with open(path, encoding="utf-8") as f:
            dashboard = json.load(f)
    except (OSError, ValueError) as e:
        problems.append(f"{path}: not valid JSON: {e}")
        return
    templating = dashboard.get("templating", {}).get("list", [])
    defined = {v.get("name") for v in templating} | GRAFANA_BUILTINS
    used = set()
    queries = 0
    ids = set()

    def check_expr(expr, where):
        names = metric_names(expr)
        if not names:
            problems.append(f"{where}: query names no metric: {expr!r}")
        check_names(names, catalog, set(), where, problems)
        used.update(base_name(n, catalog) for n in names)
        for var in variables_used(expr):
            if var not in defined:
                problems.append(f"{where}: uses undefined variable ${var}")

    for var in templating:
        if var.get("type") != "query":
            continue
        query = var.get("query")
        query = query.get("query", "") if isinstance(query, dict) else (query or "")
        where = f"variable ${var.get('name')}"
        m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", query)
        if m:
            check_expr(m.group(1), where)
            continue
        m = re.fullmatch(r"\s*query_result\((.*)\)\s*", query)
        if m:
            check_expr(m.group(1), where)
            continue
        if not re.fullmatch(r"\s*(label_values\(\w+\)|label_names\(\)|metrics\(.*\))\s*", query):
            problems.append(f"{where}: unrecognised variable query {query!r}")

    for panel in iter_panels(dashboard.get("panels", [])):
        title = panel.get("title", "<untitled>")
        if panel.get("id") in ids:
            problems.append(f"panel '{title}': duplicate id {panel.get('id')}")
        ids.add(panel.get("id"))
        if panel.get("type") == "row":
            continue
        exprs = [(t.get("refId", "?"), t.get("expr", "")) for t in panel.get("targets", [])]
        exprs = [(ref, e) for ref, e in exprs if e.strip()]
        if not exprs:
            problems.append(f"panel '{title}': panel without a query")
        for ref, expr in exprs:
            queries += 1
            check_expr(expr, f"panel '{title}' query {ref}")

    for name in sorted(set(catalog) - used):
        problems.append(f"{path}: catalog metric {name} appears on no panel")
    return queries


def rule_exprs(path):
    """(line number, expr) for each `expr:` in a rules file; handles plain, quoted and block scalars."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    out = []
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)(?:-\s+)?expr:\s*(.*)$", lines[i])
        if not m:
            i += 1
            continue
        indent, value = len(m.group(1)), m.group(2).strip()
        start = i + 1
        if value[:1] in (">", "|"):
            block = []
            i += 1
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
                block.append(lines[i].strip())
                i += 1
            value = " ".join(block)
        else:
            if value[:1] in ("'", '"') and value[-1:] == value[:1]:
                value = value[1:-1]
            i += 1
        out.append((start, value))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalog", required=True)
    parser.add_argument("--dashboard", required=True)
    parser.add_argument("--rules", action="append", default=[])
    parser.add_argument("--rule-tests", help="promtool test file that must make every alert fire")
    args = parser.parse_args()

    catalog = parse_catalog(args.catalog)
    problems = []
    queries = check_dashboard(args.dashboard, catalog, problems) or 0
    rules = 0
    for path in args.rules:
        for line, expr in rule_exprs(path):
            rules += 1
            names = metric_names(expr)
            if not names:
                problems.append(f"{path}:{line}: rule names no metric: {expr!r}")
            check_names(names, catalog, {"up"}, f"{path}:{line}", problems)
        if not rule_exprs(path):
            problems.append(f"{path}: no rules found")
    if args.rule_tests:
        with open(args.rule_tests, encoding="utf-8") as f:
            tests = f.read()
        # An alert counts as tested when some alert_rule_test names it and expects at least one alert.
        fired = set(re.findall(r"alertname:\s*(\w+)\s*\n\s*exp_alerts:\s*\n\s*- exp_labels", tests))
        for path in args.rules:
            with open(path, encoding="utf-8") as f:
                for alert in re.findall(r"^\s*- alert:\s*(\w+)", f.read(), re.M):
                    if alert not in fired:
                        problems.append(f"{args.rule_tests}: no test makes alert {alert} fire")

    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} problems")
        return 1
    print(f"ok: {queries} dashboard queries and {rules} rules use only the {len(catalog)} cataloged metrics")
    return 0


if __name__ == "__main__":
    sys.exit(main())
