"""The printed tables of the RGNN families: one per model (Tessel against the peers, or against the
floor), the ablations, the scale suite and the limits."""
from harness_env import ACCEPTANCE_TARGET, CASES, HEADS, MODELS, PEER_VARIANTS, TARGET, THREADS

def fmt(v, spec: str = ".1f", missing: str = "n/a") -> str:
    return missing if v is None else format(v, spec)


def print_table(header: list, rows: list) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda cells: " | ".join(str(c).rjust(w) if i else str(c).ljust(w)
                                    for i, (c, w) in enumerate(zip(cells, widths)))
    print(line(header))
    print("-+-".join("-" * w for w in widths))
    for r in rows:
        print(line(r))


def cell(r: dict | None) -> str:
    if r is None:
        return "-"
    if r.get("status") not in ("ok", None) or r.get("value") is None:
        return r.get("status") or "error"
    return fmt(r["value"])


def report(family: str, rows: list, lim: dict) -> None:
    idx = {(r.get("suite"), r.get("model"), r["case"], r.get("layers"), r.get("size"), r["metric"]): r
           for r in rows}
    points = []
    for r in rows:
        if r["metric"] == "tessel_epoch_ms" and r.get("suite") != "scale":  # the scale suite has its own table
            points.append((r["suite"], r["model"], r["case"], r["layers"], r["size"]))
    suites = {"acceptance": 0, "matrix": 1}
    points.sort(key=lambda p: (suites.get(p[0], 2), CASES.index(p[2]) if p[2] in CASES else 9, p[3], p[4]))
    for model in MODELS:
        pts = [p for p in points if p[1] == model]
        if not pts:
            continue
        variants = [v for v in PEER_VARIANTS if v[1] == model]
        print()
        print(f"{model.upper()}: full graph, 1 worker, {THREADS} threads, {HEADS} head; ms per epoch (median), "
              f"forward / backward+optimizer split for Tessel; peak RSS MiB"
              + ("; ratio = Tessel / best peer" if family == "peers-rgnn" else ""))
        header = ["suite", "case", "L", "size", "tessel fwd", "tessel bwd", "tessel epoch", "tessel MiB"]
        if family == "peers-rgnn":
            header += [v[3] for v in variants] + ["best peer", "ratio", "mem lower"]
        else:
            header += ["lower bound", "bound by", "fraction_of_limit"]
        table = []
        for p in pts:
            get = lambda metric: idx.get(p + (metric,))
            t = get("tessel_epoch_ms")
            line = [p[0], p[2] + (" (one-hot)" if t.get("input") == "onehot" else ""), p[3], p[4],
                    cell(get("tessel_forward_ms")), cell(get("tessel_backward_ms")), cell(t),
                    fmt((get("tessel_peak_rss") or {}).get("value"), ".0f")]
            if family == "peers-rgnn":
                for v in variants:
                    e = get(f"{v[4]}_epoch_ms")
                    m = get(f"{v[4]}_peak_rss")
                    line.append("-" if e is None else
                                cell(e) + (f" ({m['value']:.0f})" if e.get("status") == "ok" and m and m.get("value")
                                           else ""))
                rss = get("tessel_peak_rss") or {}
                line += [t.get("baseline_system", "n/a"), fmt(t.get("ratio"), ".3f"),
                         {True: "yes", False: "no"}.get(rss.get("lower_than_baseline"), "n/a")]
            else:
                lb = get("lower_bound_ms")
                line += [fmt(lb["value"]), lb.get("bound_level") if lb.get("bound") == "memory" else lb.get("bound"),
                         fmt(t.get("fraction_of_limit"), ".3f")]
            table.append(line)
        print_table(header, table)
        if family == "peers-rgnn":
            print(f"(peer cells: epoch ms (peak RSS MiB), or oom / timeout / error; "
                  f"target: ratio <= {TARGET['ratio']:.3f} on {TARGET['case']}, size {TARGET['size']}, "
                  f"{TARGET['layers']} layers; the acceptance suite's target is {ACCEPTANCE_TARGET})")
            detail = []
            for p in pts:
                for name, prefix in [("tessel", "tessel")] + [(v[3] + ("" if v[5] else " (reference)"), v[4])
                                                             for v in variants]:
                    e = idx.get(p + (f"{prefix}_epoch_ms",))
                    if e is None:
                        continue
                    f_ = idx.get(p + (f"{prefix}_forward_ms",)) or {}
                    b_ = idx.get(p + (f"{prefix}_backward_ms",)) or {}
                    m = idx.get(p + (f"{prefix}_peak_rss",)) or {}
                    status = e.get("status") or "error"
                    if e.get("error"):
                        status += f": {e['error'][:70]}"
                    detail.append([p[0], p[2], p[3], p[4], name, fmt(f_.get("value")), fmt(b_.get("value")),
                                   fmt(e.get("value")), fmt(e.get("min_ms")), fmt(m.get("value"), ".0f"),
                                   e.get("epochs_timed") or 0, fmt(e.get("fraction_of_limit"), ".3f"), status])
            print()
            print_table(["suite", "case", "L", "size", "system", "fwd ms", "bwd ms", "epoch ms", "min ms",
                         "peak MiB", "epochs", "fraction_of_limit", "status"], detail)
    abl = [r for r in rows if r.get("suite") == "ablation" and r["phase"] in ("epoch",)]
    if abl:
        print()
        print("Tessel ablations (hidden 64, 2 layers): the setting off vs the default; ratio = off / default")
        table = []
        for r in abl:
            status = (r.get("status") or "error") + (f": {r['error'][:70]}" if r.get("error") else "")
            table.append([r["model"], r["case"], r["setting"], r["metric"], fmt(r["value"]), fmt(r.get("baseline")),
                          fmt(r.get("ratio"), ".3f"), status])
        print_table(["model", "case", "setting", "metric", "value", "default", "ratio", "status"], table)
    scale = [r for r in rows if r.get("suite") == "scale" and r["metric"] == "tessel_epoch_ms"]
    if scale:
        print()
        print("Scale (Tessel only): the 1M-node, 21M-edge graph, hidden 64, 2 layers, 1 worker, "
              f"{THREADS} threads; peak RSS of the run")
        table = []
        for r in scale:
            b = idx.get(("scale", r["model"], "scale", 2, 64, "tessel_peak_bytes_per_edge")) or {}
            lb = idx.get(("scale", r["model"], "scale", 2, 64, "lower_bound_ms")) or {}
            status = (r.get("status") or "error") + (f": {r['error'][:70]}" if r.get("error") else "")
            peak = b.get("peak_rss_bytes")
            table.append([r["model"], fmt(r.get("forward_ms")), fmt(r.get("backward_ms")), cell(r),
                          fmt(lb.get("value")), fmt(r.get("fraction_of_limit"), ".3f"),
                          fmt(peak / 2**20 if peak else None, ".0f"), fmt(b.get("value"), ".1f"),
                          b.get("target_bytes_per_edge"), {True: "yes", False: "no"}.get(b.get("meets_target"), "n/a"),
                          status])
        print_table(["model", "fwd ms", "bwd ms", "epoch ms", "lower bound", "fraction_of_limit", "peak MiB",
                     "B/edge", "limit", "meets", "status"], table)
    if lim:
        extra = (f", {lim['sgemm_avx512']['gflops']:.1f} with OPENBLAS_CORETYPE=SkylakeX"
                 if "sgemm_avx512" in lim else "")
        print(f"\nlimits at {THREADS} threads: OpenBLAS sgemm {lim['sgemm_default']['gflops']:.1f} GFLOP/s "
              f"({lim['sgemm_default']['blas'].split()[-2]} kernels{extra}); "
              f"stream copy {lim['stream_copy']['gbps']:.1f} GB/s"
              + (f", stream update {lim['stream_update']['gbps']:.1f} GB/s" if "stream_update" in lim else "")
              + "; per level " + ", ".join(f"{lv['name']} {lv['gbps']:.1f}" for lv in lim["levels"]) + " GB/s")
