"""bench/run.sh's driver for the RGNN families (bench/README.md):

  rgnn        Tessel's full-graph training time (forward, backward + optimizer, epoch) and peak memory for
              RGCN, RGAT and HGT, against the machine's limits;
  peers-rgnn  the same, plus the peers on the same graph files: PyG (RGCNConv, FastRGCNConv, RGATConv,
              HGTConv), DGL (RelGraphConv, per-relation GATConv, HGTConv) and, for RGCN, a hand-written
              compact PyTorch reference; ratio = Tessel epoch / best peer epoch for the model.

  python harness.py FAMILY [--quick] [--json FILE] [--wait-idle S] [--models rgcn,rgat,hgt]
                    [--cases aifb,fb15k,synthetic,scale] [--sizes 32,64,128] [--layers 1,2] [--peers pyg,dgl,torch]
                                                (run from anywhere; paths are the repository's)

Four suites (bench/README.md "Method"):
  matrix      Hector's method: every selected (model, case, layers, size): full graph, 1 head, random
              float32 input features of width `size`, hidden `size`, the last layer outputs the classes;
  acceptance  the original RGCN configuration: hidden 64, 2 layers, AIFB one-hot and FB15k-237 with 64
              features, against PyG and the compact reference (when rgcn, 64 and 2 are selected);
  ablation    Tessel alone with model.compact=false and with model.reorder=false, FB15k-237 and the
              synthetic graph, hidden 64, 2 layers, against Tessel's default (when 64 and 2 are selected);
  scale       Tessel alone on a generated 1M-node, 21M-edge graph (case "scale"), hidden 64, 2 layers:
              epoch time, fraction_of_limit and peak memory per edge against SCALE_BYTES_PER_EDGE.

Prints a table per model and writes the JSON rows. Exit 0 when every measurement ran (a peer that runs out
of memory or time is a result, not a failure), 1 when one failed (its row says why), 2 on a usage error.
Runs everything one process at a time, so the measurements do not compete for the cores.

The parts, beside this file: harness_env (paths, settings, running a child), harness_graphs (the graph
files), harness_floor (the limits and the floor), harness_runs (Tessel's and the peers' runs),
harness_rows (the JSON rows) and harness_tables (the printed tables). bench/gpu/compare.py imports this
module for WORK, TESSEL, JOB, PEERS and prepare_graphs.
"""
import argparse
import json
import os
import sys
import time

import graphfile
from harness_env import (ABLATIONS, ACCEPTANCE_TARGET, CASES, JOB, LAYER_COUNTS, MODELS, PEER_VARIANTS, PEERS,
                         SCALE_EPOCHS, SIZES, SYSTEMS, TARGET, TESSEL, WORK, cpu_busy, git_commit, log)
from harness_floor import limit_rows, lower_bound, measure_limits
from harness_graphs import prepare_graphs
from harness_rows import ablation_rows, point_rows, scale_rows
from harness_runs import Budget, run_peer, run_tessel
from harness_tables import report

# What bench/gpu/compare.py uses of this module, besides main.
__all__ = ["main", "JOB", "PEERS", "TESSEL", "WORK", "prepare_graphs"]


def csv_list(kind, allowed):
    def parse(text: str) -> list:
        items = [kind(t) for t in text.split(",") if t.strip()]
        bad = [t for t in items if t not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"expected a comma-separated subset of "
                                             f"{','.join(map(str, allowed))}, got {text!r}")
        return [t for t in allowed if t in items]  # canonical order
    return parse


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("family", choices=["rgnn", "peers-rgnn"])
    ap.add_argument("--quick", action="store_true", help="5 timed epochs instead of 20, shorter caps and limits")
    ap.add_argument("--json", help="where to write the rows (default build/bench/results/FAMILY.json)")
    ap.add_argument("--wait-idle", type=float, default=0, metavar="S",
                    help="before each measurement, wait up to S seconds for the cores to be idle")
    ap.add_argument("--models", type=csv_list(str, MODELS), default=list(MODELS))
    ap.add_argument("--cases", type=csv_list(str, CASES + ("scale",)), default=list(CASES) + ["scale"])
    ap.add_argument("--sizes", type=csv_list(int, SIZES), default=list(SIZES))
    ap.add_argument("--layers", type=csv_list(int, LAYER_COUNTS), default=list(LAYER_COUNTS))
    ap.add_argument("--peers", type=csv_list(str, SYSTEMS), default=list(SYSTEMS),
                    help="peer systems (peers-rgnn): pyg, dgl, torch (the compact RGCN reference)")
    ap.add_argument("--peer-deadline", type=float, default=0, metavar="S",
                    help="wall-clock cap of one peer run in the matrix (default 60 s, 40 s with --quick)")
    ap.add_argument("--budget-minutes", type=float, default=0, metavar="M",
                    help="no peer run starts after the family has run M minutes (default 70, 30 with --quick)")
    ap.add_argument("--epochs", type=int, default=0, help=argparse.SUPPRESS)  # testing: timed epochs
    a = ap.parse_args()
    budget = Budget(a.quick, a.epochs, a.peer_deadline, a.budget_minutes, a.wait_idle)
    json_path = os.path.abspath(a.json or os.path.join(WORK, "results", f"{a.family}.json"))
    errors = []
    with_peers = a.family == "peers-rgnn"
    run = {"bench": a.family, "commit": git_commit()}  # carried by every point row
    t_start = time.monotonic()

    busy = cpu_busy(1.0)
    if busy > 0.10:
        log(f"warning: the cores are {100 * busy:.0f}% busy before starting: other work shares them, so the "
            f"times below may be inflated (--wait-idle S waits for them before each measurement)")
    at_64_2 = 64 in a.sizes and 2 in a.layers
    acceptance = "rgcn" in a.models and at_64_2
    graphs = prepare_graphs(a.cases, a.sizes, acceptance, errors)
    lim = measure_limits(a.quick, errors, a.wait_idle)
    rows = limit_rows(a.family, lim)
    stats_cache = {}

    def stats_of(case: str, graph: str) -> dict | None:
        """Graph sizes of the case (its structure is the same at every size; feature_dim is the file's)."""
        try:
            g = graphfile.load(graph)
        except ValueError as e:
            errors.append(str(e))
            return None
        if case not in stats_cache:
            s = g.stats()
            s["node_types"] = g.num_node_types
            stats_cache[case] = s
        return {**stats_cache[case], "feature_dim": 0 if g.features is None else int(g.features.shape[1])}

    # Results by (system, variant, model, case, layers, size) for reuse (FB15k's acceptance point is the
    # matrix point) and for skipping a variant that already ran out of time or memory at a smaller point.
    done = {}

    def skipped(v, model, case, layers, size):
        """A variant is not run at a point when it cannot produce a result there: it ran out of memory or
        time at a smaller point (as many or fewer layers, the same or a smaller size), or a smaller point's
        fastest epoch says that setup + warm-up + one timed epoch cannot fit in the deadline (an epoch at a
        larger point is no faster). Its rows say why, with status oom or timeout."""
        for (sys_, var, m, c, l, s), res in done.items():
            if (sys_, var, m, c) != (v[0], v[2], model, case) or l > layers or s > size or res.get("skipped"):
                continue
            if res.get("status") in ("oom", "timeout"):
                return {"status": res["status"], "skipped": True,
                        "error": f"not run: {res['status']} at {l} layer(s), size {s}"}
            if res.get("status") == "ok" and res.get("epoch_seconds") and (l, s) != (layers, size):
                need = (res.get("setup_seconds") or 0) + 2 * min(res["epoch_seconds"])
                if need > budget.peer_deadline_s:
                    return {"status": "timeout", "skipped": True,
                            "error": f"not run: at {l} layer(s), size {s} setup + 2 epochs took {need:.0f} s, "
                                     f"more than the {budget.peer_deadline_s:.0f} s deadline"}
        return None

    def peers_at(model, case, layers, size, graph, acceptance_run, systems, reuse=True):
        """Runs (or reuses) every selected peer variant of `model` at one point. acceptance_run: the
        acceptance suite's budget; reuse: share results with other suites at the same point (same file)."""
        out = []
        if not with_peers:
            return out
        for v in PEER_VARIANTS:
            system, vmodel, variant = v[0], v[1], v[2]
            if vmodel != model or system not in systems:
                continue
            key = (system, variant, model, case, layers, size)
            if reuse and key in done:
                out.append((v, done[key]))
                continue
            res = None if acceptance_run else skipped(v, model, case, layers, size)
            if res is None and time.monotonic() - t_start > budget.family_s:
                res = {"status": "timeout", "skipped": True,
                       "error": f"not run: the family's budget of {budget.family_s / 60:.0f} minutes was spent "
                                f"(--budget-minutes)"}
            if res is None:
                epoch_s = budget.acceptance_epoch_s if acceptance_run else budget.peer_epoch_s
                deadline = budget.acceptance_deadline_s if acceptance_run else budget.peer_deadline_s
                tag = f"{model}-{case}-L{layers}-h{size}" + ("" if reuse else "-acceptance")
                res = run_peer(tag, graph, system, model, variant, layers, size, epoch_s, deadline, budget)
                if res.get("status") not in ("ok", "oom", "timeout"):
                    errors.append(f"peer {v[3]} {tag}: {res.get('error')}")
            if reuse:
                done[key] = res
            out.append((v, res))
        return out

    tessel_done = {}

    def tessel_at(model, case, layers, size, graph, tag_suffix="", extra=(), epochs=None):
        key = (model, case, layers, size, tag_suffix)
        if key not in tessel_done:
            tag = f"{model}-{case}-L{layers}-h{size}{tag_suffix}"
            res = run_tessel(tag, graph, model, layers, size, budget, extra, epochs)
            if res["status"] != "ok":
                errors.append(f"tessel {tag}: {res.get('error')}")
            tessel_done[key] = res
        return tessel_done[key]

    # The acceptance suite first (RGCN, hidden 64, 2 layers; AIFB one-hot, FB15k-237 with 64 features).
    if acceptance:
        for case in ("aifb", "fb15k"):
            graph = graphs.get((case, None))
            if graph is None:
                continue
            stats = stats_of(case + "-acceptance", graph) if case == "aifb" else stats_of(case, graph)
            if stats is None:
                continue
            bound = lower_bound("rgcn", stats, 64, 2, lim)
            # PyG and the reference, as originally measured, with the original budget. FB15k-237's file is
            # the matrix's (fb15k, size 64): the matrix reuses these runs (and adds DGL's).
            systems = [s for s in a.peers if s != "dgl"]
            if case == "aifb":
                tessel = tessel_at("rgcn", case, 2, 64, graph, "-onehot")
                peers = peers_at("rgcn", case, 2, 64, graph, True, systems, reuse=False)
            else:
                tessel = tessel_at("rgcn", case, 2, 64, graph)
                peers = peers_at("rgcn", case, 2, 64, graph, True, systems)
            rows += point_rows(run, "acceptance", "rgcn", case, 2, 64, graph, stats, bound, tessel, peers,
                               ACCEPTANCE_TARGET if with_peers else None)

    # The matrix (Hector's method): the headline points (2 layers, size 64) of every model and case first, so
    # that a spent budget cuts the rest; then the others, smaller before larger (for `skipped`).
    order = sorted(((l, s) for l in a.layers for s in a.sizes), key=lambda ls: (ls != (2, 64), ls))
    for layers, size in order:
        for model in a.models:
            for case in (c for c in a.cases if c in CASES):
                graph = graphs.get((case, size))
                if graph is None:
                    errors.append(f"{model} {case} size {size}: no graph file, skipped")
                    continue
                stats = stats_of(case, graph)
                if stats is None:
                    continue
                bound = lower_bound(model, stats, size, layers, lim)
                tessel = tessel_at(model, case, layers, size, graph)
                peers = peers_at(model, case, layers, size, graph, False, a.peers)
                target = TARGET["ratio"] if with_peers and (case, size, layers) == (
                    TARGET["case"], TARGET["size"], TARGET["layers"]) else None
                rows += point_rows(run, "matrix", model, case, layers, size, graph, stats, bound, tessel,
                                   peers, target)

    # Tessel's ablations: compact materialisation off, linear-operator reordering off.
    if at_64_2:
        for model in a.models:
            for case in ("fb15k", "synthetic"):
                graph = graphs.get((case, 64))
                if case not in a.cases or graph is None:
                    continue
                stats = stats_of(case, graph)
                bound = lower_bound(model, stats, 64, 2, lim)
                default = tessel_at(model, case, 2, 64, graph)
                variants = {key: tessel_at(model, case, 2, 64, graph, f"-{infix}", [f"model.{key}=false"])
                            for key, infix in ABLATIONS}
                rows += ablation_rows(run, model, case, graph, stats, bound, default, variants)

    # The scale suite: Tessel alone on the 1M-node graph, peak memory per edge against its limit.
    if "scale" in a.cases and graphs.get(("scale", 64)) is not None:
        graph = graphs[("scale", 64)]
        stats = stats_of("scale", graph)
        for model in a.models:
            if stats is None:
                break
            bound = lower_bound(model, stats, 64, 2, lim)
            res = tessel_at(model, "scale", 2, 64, graph, epochs=2 if a.quick else SCALE_EPOCHS)
            rows += scale_rows(run, model, graph, stats, bound, res)

    os.makedirs(os.path.dirname(json_path), exist_ok=True)
    with open(json_path, "w") as f:
        json.dump(rows, f, indent=1)
        f.write("\n")
    report(a.family, rows, lim)
    print(f"\nJSON: {json_path} ({len(rows)} rows; {time.monotonic() - t_start:.0f} s)")
    contended = sorted({f"{r.get('model')}/{r['case']}/{r.get('system')}" for r in rows
                        if r.get("busy_before") is not None and r["busy_before"] > 0.10})
    if contended:
        print(f"warning: the cores were busy when these started, so their times may be inflated: "
              f"{', '.join(contended)} (rerun with --wait-idle S)")
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
