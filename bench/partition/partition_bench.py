"""The distributed partitioner (bench/run.sh partition): quality against METIS, and time and memory per rank
as the graph and the rank count grow.

quality  FB15k-237 (tessel import edges, the inverse and self-loop relations added; written as DGL's chunked
         format by to_chunked.py) and a generated graph of about 21M edges (tessel generate graph --chunked):
         METIS (`tessel partition G.h5`, one process) against PT-Scotch and the streaming partitioner
         (`mpirun -np P tessel partition --input DIR`), each cut into 4 parts: edge cut, its ratio to METIS's,
         the worst imbalance over the constraints, and wall time. Targets: PT-Scotch's cut within 15% of
         METIS's, every imbalance at most 1.05.
scale    generated graphs of 10M and 30M edges, 32 features (100M with --full: the memory section's graph, 8
         features; 10M again with 256 features): `--method stream` (and ptscotch at 10M x 32) on P = 1, 2,
         4, 8 ranks of this machine, K = P parts: wall time and each rank's peak RSS
         (the partitioner's own table), beside the graph's in-memory size (the HeteroGraph arrays: 16 bytes
         an edge with the derived relations, the features, 11 bytes a node) and the one-process path's peak
         (import + METIS). Writes the table, the JSON rows and an SVG plot (peak RSS per rank against P).

memory   no rank holds the whole graph (issue 34, acceptance 2): generated graphs (10M and 30M base edges, 100M
         with --full; 8 features, 1% training and 1% test nodes) cut by `--method stream` into K = P parts on P = 2,
         4, 8 ranks, then one epoch of full-graph and of sampled RGCN training from the parts (P workers):
         each rank's peak RSS (the partitioner's table; summary.json's worker_peak_rss_bytes and
         coordinator_peak_rss_bytes), beside the graph's in-memory size. Then at P = 4 today's path (the
         coordinator loads data.graph and cuts it, partition.method = "range") and training from the parts,
         uncapped, then with every rank capped (capped.sh: a memory cgroup a rank) halfway between their
         largest peaks: today's path must fail, training from the parts must not. Beside each peak, the
         prediction of the largest rank (the partitioner's own; `tessel plan`'s for training, a worker's data
         without its process floor). A run whose P ranks are predicted, with margins, past 0.8 of this
         machine's memory is not started (a row saying so): here all ranks share one machine, on a cluster
         each has its own.

peers    DGL's dgl.distributed.partition_graph (METIS on one machine, training nodes and edges balanced, 2
         threads; dgl_partition.py in bench/peers/setup.sh --dgl's venv) beside `tessel partition G.h5` (METIS)
         and --input with ptscotch and stream on 2 ranks, 4 parts each, on FB15k-237 and the 10M-edge memory
         graph (--full: also 30M): edge cut (Tessel's definition for both), worst imbalance, time, peak RSS.

  python partition_bench.py [--quick] [--full] [--sections quality,scale,memory,peers] [--json FILE] [--svg FILE]
  python partition_bench.py --plot JSON [JSON ...] [--svg FILE]   (one plot from several runs' rows)
  --sizes M[,M] picks the generated graphs of the memory and peers sections (millions of base edges).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, "build")
TESSEL = os.path.join(BUILD, "bin", "tessel")
DATA = os.environ.get("TESSEL_DATA_DIR", os.path.join(os.path.dirname(ROOT), "shared", "data"))
WORK = os.path.join(BUILD, "bench", "partition")
HERE = os.path.dirname(os.path.abspath(__file__))


def mpirun_flags():
    out = subprocess.run(["bash", "-c", f"source {ROOT}/scripts/lib.sh; tessel_mpirun_base_flags"],
                         capture_output=True, text=True, check=True)
    return out.stdout.split()


def timed(cmd, log):
    """Runs cmd; returns (seconds, peak RSS MB of the largest process, its output). Raises on failure."""
    t = time.monotonic()
    with open(log, "w") as f:
        p = subprocess.run(["/usr/bin/time", "-f", "TIME_PEAK_KB %M"] + cmd, stdout=f, stderr=subprocess.STDOUT)
    seconds = time.monotonic() - t
    text = open(log).read()
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:6])} ... exited {p.returncode}: {text[-600:]}")
    peak = int(re.findall(r"TIME_PEAK_KB (\d+)", text)[-1]) / 1e3
    return seconds, peak, text


def table_of(text):
    """The partitioner's printed table: cut, random cut, imbalances, per-rank peaks."""
    cut = re.search(r"edge cut\s+(\d+)\s+\(random partition: (\d+)", text)
    imb = [float(x) for x in re.findall(r" [a-z]+ (\d\.\d+)", re.search(r"imbalance(.*)", text).group(1))]
    ranks = re.findall(r"^\s+\d+\s+\d+\s+\d+\s+(\d+\.\d+)\s+(\d+\.\d+)$", text, re.M)
    return {"edge_cut": int(cut.group(1)), "random_edge_cut": int(cut.group(2)), "imbalance": max(imb),
            "rank_peak_mb": [float(a) for a, _ in ranks], "rank_predicted_mb": [float(b) for _, b in ranks]}


def partition_dist(src, ranks, method, parts, tag):
    out = os.path.join(WORK, f"parts-{tag}")
    shutil.rmtree(out, ignore_errors=True)
    cmd = ["mpirun"] + mpirun_flags() + ["-np", str(ranks), TESSEL, "partition", "--input", src, "--add-inverse",
                                         "--add-self-loop", "--parts", str(parts), "--method", method, "--out", out]
    seconds, peak, text = timed(cmd, out + ".log")
    shutil.rmtree(out, ignore_errors=True)
    row = table_of(text)
    row.update(seconds=seconds)
    return row


def partition_metis(h5, parts, tag):
    out = os.path.join(WORK, f"parts-{tag}")
    shutil.rmtree(out, ignore_errors=True)
    seconds, peak, text = timed([TESSEL, "partition", h5, "--parts", str(parts), "--out", out], out + ".log")
    shutil.rmtree(out, ignore_errors=True)
    row = table_of(text)
    row.update(seconds=seconds, peak_mb=peak)
    return row


def generated(edges_m, dim):
    """A generated chunked graph of about edges_m million base edges (avg degree 8) and its .h5 import."""
    nodes = int(edges_m * 1e6 / 4)
    d = os.path.join(WORK, f"gen{edges_m}m-f{dim}")
    if not os.path.exists(os.path.join(d, "metadata.json")):
        subprocess.run(["mpirun"] + mpirun_flags() + ["-np", "2", TESSEL, "generate", "graph", "--chunked", "--nodes",
                                                      str(nodes), "--feature-dim", str(dim), "--out", d],
                       check=True, capture_output=True)
    return d, nodes


def in_memory_mb(nodes, base_edges, dim):
    return (16 * (2 * base_edges + nodes) + nodes * (11 + 4 * dim)) / 1e6


def fb15k():
    """FB15k-237 as a graph file (its inverse and self-loop relations added) and in DGL's chunked format."""
    fb_h5 = os.path.join(WORK, "fb15k.h5")
    if not os.path.exists(fb_h5):
        subprocess.run([TESSEL, "import", "edges", "--input", os.path.join(DATA, "fb15k-237", "FB15k-237.tar.gz"),
                        "--add-inverse", "--add-self-loop", "--out", fb_h5], check=True, capture_output=True)
    fb_dir = os.path.join(WORK, "fb15k-chunked")
    if not os.path.exists(os.path.join(fb_dir, "metadata.json")):
        subprocess.run([sys.executable, os.path.join(HERE, "to_chunked.py"), fb_h5, fb_dir, "4"], check=True)
    return fb_h5, fb_dir


def quality(args, rows):
    fb_h5, fb_dir = fb15k()
    syn_m = 5 if args.quick else 21
    syn_dir, syn_nodes = generated(syn_m, 8)
    syn_h5 = syn_dir + ".h5"
    if not os.path.exists(syn_h5):
        subprocess.run([TESSEL, "import", "chunked", syn_dir, "--add-inverse", "--add-self-loop", "--out", syn_h5],
                       check=True, capture_output=True)
    print(f"\n{'graph':<16} {'method':<9} {'ranks':>5} {'edge cut':>10} {'vs METIS':>9} {'imbalance':>9} {'time s':>8}")
    for name, h5, d in (("fb15k-237", fb_h5, fb_dir), (f"synthetic-{syn_m}M", syn_h5, syn_dir)):
        metis = partition_metis(h5, 4, f"{name}-metis")
        cases = [("metis", 1, metis)]
        for method in ("ptscotch", "stream"):
            cases.append((method, 2, partition_dist(d, 2, method, 4, f"{name}-{method}")))
        for method, ranks, r in cases:
            ratio = r["edge_cut"] / metis["edge_cut"]
            print(f"{name:<16} {method:<9} {ranks:>5} {r['edge_cut']:>10} {ratio:>9.3f} {r['imbalance']:>9.3f} "
                  f"{r['seconds']:>8.1f}")
            rows.append({"section": "quality", "graph": name, "method": method, "ranks": ranks, "parts": 4,
                         "edge_cut": r["edge_cut"], "cut_vs_metis": ratio, "imbalance": r["imbalance"],
                         "seconds": r["seconds"],
                         "target": "cut within 1.15 of METIS, imbalance <= 1.05" if method == "ptscotch" else ""})


def scale(args, rows):
    sizes = [10] if args.quick else [10, 30] + ([100] if args.full else [])
    ranks_list = [1, 2] if args.quick else [1, 2, 4, 8]
    print(f"\n{'edges':>6} {'dim':>4} {'in-memory MB':>12} {'method':<9} {'P':>2} {'time s':>8} {'peak/rank MB':>13} "
          f"{'max rank MB':>11} {'predicted MB':>12}")
    # Each size at 32 features (8 at 100M: the memory section's graph), and 10M again at 256: the features
    # stream from the chunk files to the part files, so a rank's peak should not grow with their width.
    graphs = [(m, 8 if m >= 100 else 32) for m in sizes] + [(10, 256)]
    for m, dim in graphs:
        d, nodes = memory_graph(m) if m >= 100 else generated(m, dim)
        graph_mb = in_memory_mb(nodes, m * 1e6, dim)
        # PT-Scotch: 66 s and 2.8 GB a rank at 10M
        methods = ["stream"] + (["ptscotch"] if m <= 10 and dim == 32 else [])
        for method in methods:
            for p in ranks_list:
                try:
                    r = partition_dist(d, p, method, p, f"scale{m}-f{dim}-{method}-{p}")
                except RuntimeError as e:
                    print(f"{m:>5}M {dim:>4} {graph_mb:>12.0f} {method:<9} {p:>2}  failed: {str(e)[-200:]}")
                    rows.append({"section": "scale", "edges_m": m, "feature_dim": dim, "method": method, "ranks": p,
                                 "error": str(e)[-400:]})
                    continue
                peaks = r["rank_peak_mb"]
                mean = sum(peaks) / len(peaks)
                print(f"{m:>5}M {dim:>4} {graph_mb:>12.0f} {method:<9} {p:>2} {r['seconds']:>8.1f} {mean:>13.0f} "
                      f"{max(peaks):>11.0f} "
                      f"{max(r['rank_predicted_mb']):>12.0f}", flush=True)
                rows.append({"section": "scale", "edges_m": m, "feature_dim": dim, "graph_mb": graph_mb,
                             "method": method, "ranks": p, "seconds": r["seconds"], "rank_peak_mb": peaks,
                             "max_rank_peak_mb": max(peaks), "rank_predicted_mb": r["rank_predicted_mb"],
                             "edge_cut": r["edge_cut"], "imbalance": r["imbalance"]})


def job_without_method():
    """rgcn-synthetic.toml without its `method = "metis"` line: parts cut by stream train from it."""
    path = os.path.join(WORK, "rgcn-parts.toml")
    with open(os.path.join(ROOT, "jobs", "examples", "rgcn-synthetic.toml")) as f:
        text = "".join(line for line in f if not re.match(r"\s*method\s*=", line))
    with open(path, "w") as f:
        f.write(text)
    return path


def train(job, workers, sets, tag, cap_mb=0):
    """One run under mpirun (-np workers + 1); returns its summary.json, or {"error": ...} when it failed."""
    out = os.path.join(WORK, f"run-{tag}")
    shutil.rmtree(out, ignore_errors=True)
    wrap = [os.path.join(HERE, "capped.sh"), str(int(cap_mb / 1.048576))] if cap_mb else []  # MB -> MiB
    cmd = (["mpirun"] + mpirun_flags() + ["--enable-recovery", "-np", str(workers + 1)] + wrap +
           [TESSEL, "run", job, "--set", f"resources.workers={workers}", "--set", f"job.output_dir={out}",
            "--set", "metrics.port_base=0", "--set", "train.epochs=1", "--set", "resources.threads_per_worker=1"] + sets)
    t = time.monotonic()
    with open(out + ".log", "w") as f:
        p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    seconds = time.monotonic() - t
    if cap_mb:  # one cgroup per rank, gone with its processes
        subprocess.run(["bash", "-c", "rmdir /sys/fs/cgroup/memory/tessel-cap-* /sys/fs/cgroup/tessel-cap-* 2>/dev/null"])
    summary = os.path.join(out, "summary.json")
    if p.returncode != 0 or not os.path.exists(summary):
        lines = [l for l in open(out + ".log").read().splitlines() if "tessel: error" in l]
        return {"error": f"exit {p.returncode}: {(lines or ['no error line'])[-1][:300]}", "seconds": seconds}
    s = json.load(open(summary))
    s["seconds"] = seconds
    return s


def memory_graph(m):
    """A generated chunked graph of m million base edges, 8 features, 1% training and 1% test nodes."""
    nodes = int(m * 1e6 / 4)
    d = os.path.join(WORK, f"mem{m}m")
    if not os.path.exists(os.path.join(d, "metadata.json")):
        subprocess.run(["mpirun"] + mpirun_flags() + ["-np", "4", TESSEL, "generate", "graph", "--chunked", "--nodes",
                                                      str(nodes), "--feature-dim", "8", "--train-fraction", "0.01",
                                                      "--test-fraction", "0.01", "--out", d], check=True,
                       capture_output=True)
    return d, nodes


def predicted_worker_mb(job, workers, sets):
    """`tessel plan`'s largest predicted worker in MB (its data: no process floor), or None."""
    out = subprocess.run([TESSEL, "plan", job, "--set", f"resources.workers={workers}"] + sets,
                         capture_output=True, text=True)
    mib = [float(x) * (1024 if unit == "GiB" else 1) for x, unit in
           re.findall(r"^\d+(?:\s+\d+)+\s+(\d+\.\d+) ([MG]iB)", out.stdout, re.M)]  # full-graph or sampled
    return max(mib) * 1.048576 if out.returncode == 0 and mib else None


def machine_share(worker_mb, workers):
    """(cap MB, why not run): how a run of `workers` ranks on this one machine is kept from taking it down. A run
    whose largest predicted worker (its data, a quarter more for the model's error, 200 MB for the process)
    times the ranks fits 0.8 of this machine's memory runs as it is (0, ""); else each rank is capped (a memory
    cgroup, capped.sh) at its share of that 0.8, and killed past it; a run predicted above the share even
    without the margin is not started (0, why). On a cluster each rank has a machine of its own."""
    if worker_mb is None:
        return 0, ""
    total_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e6
    if workers * (1.25 * worker_mb + 200) <= 0.8 * total_mb:
        return 0, ""
    share = int(0.8 * total_mb / workers)
    if worker_mb + 200 > share:
        return 0, (f"not run: {workers} ranks of {worker_mb:.0f} MB predicted exceed the {share} MB a rank that 0.8 "
                   f"of this machine's {total_mb:.0f} MB gives them; on a cluster each rank has its own machine")
    return share, ""


def peaks_of(r):
    """Every rank's peak MB of a training run, rank 0 (the coordinator) first."""
    return [r["coordinator_peak_rss_bytes"] / 1e6] + [v / 1e6 for v in r["worker_peak_rss_bytes"]]


def memory(args, rows):
    sizes = args.sizes or ([10] if args.quick else ([100] if args.full else [10, 30]))
    job = job_without_method()
    sampled = ["--set", "train.mode=sampled", "--set", "train.batch_size=1024", "--set", "train.fanouts=[5,5]",
               "--set", "train.eval_fanouts=[5,5]"]
    for m in sizes:
        d, nodes = memory_graph(m)
        graph_mb = in_memory_mb(nodes, m * 1e6, 8)
        print(f"\n{m}M base edges, {nodes} nodes, 8 features: the graph in memory {graph_mb:.0f} MB")
        print(f"{'P':>2} {'what':<30} {'wall s':>8} {'largest rank MB':>15} {'rank 0 MB':>9} {'pred. MB':>9}  "
              "every rank MB")
        for p in ([2] if args.quick else [2, 4, 8]):
            parts = os.path.join(WORK, f"memparts{m}-{p}")
            if not os.path.exists(os.path.join(parts, "partition.json")):
                cmd = ["mpirun"] + mpirun_flags() + ["-np", str(p), TESSEL, "partition", "--input", d,
                                                     "--add-inverse", "--add-self-loop", "--parts", str(p), "--method",
                                                     "stream", "--out", parts]
                seconds, _, text = timed(cmd, parts + ".log")
                part = table_of(text)
                part["seconds"] = seconds
                json.dump(part, open(parts + ".json", "w"))
            part = json.load(open(parts + ".json"))
            # (what, seconds, every rank's peak MB, the prediction of the largest, error)
            cases = [("partition (stream)", part.get("seconds", 0), part["rank_peak_mb"],
                      max(part.get("rank_predicted_mb") or [0]) or None, None)]
            from_parts = ["--set", "data.format=partitions", "--set", "data.graph=", "--set", f"data.partitions={parts}"]
            streamed = from_parts + ["--set", "train.halo=streamed"]
            for what, sets in (("full-graph epoch", from_parts), ("full-graph, streamed", streamed),
                               ("sampled epoch", from_parts + sampled)):
                if args.cases and not any(c in what for c in args.cases):
                    continue
                # tessel plan's prediction is a worker's data, without the process's own (libraries, buffers).
                predicted = predicted_worker_mb(job, p, sets)
                cap, too_big = machine_share(predicted, p)
                if too_big:
                    cases.append((what, 0.0, [], predicted, too_big))
                    continue
                tag = what.replace(",", "").replace(" ", "-")
                r = train(job, p, sets, f"mem{m}-{p}-{tag}", cap_mb=cap)
                if cap:
                    what += f" (cap {cap})"
                cases.append((what, r["seconds"], [] if "error" in r else peaks_of(r), predicted, r.get("error")))
            for what, seconds, peaks, predicted, error in cases:
                shown = f"{predicted:.0f}" if predicted else "-"
                if error:
                    print(f"{p:>2} {what:<30} {seconds:>8.1f}  predicted {shown} MB; {error[-160:]}")
                else:
                    print(f"{p:>2} {what:<30} {seconds:>8.1f} {max(peaks):>15.0f} {peaks[0]:>9.0f} {shown:>9}  "
                          + " ".join(f"{v:.0f}" for v in peaks), flush=True)
                rows.append({"section": "memory", "edges_m": m, "graph_mb": graph_mb, "ranks": p, "what": what,
                             "seconds": seconds, "rank_peak_mb": peaks, "predicted_mb": predicted,
                             "max_rank_peak_mb": max(peaks) if peaks else None, "error": error,
                             "target": "P = 8: every rank below graph_mb / 2" if p == 8 else ""})
        if not args.cases or "capped" in args.cases:
            capped(args, rows, m, d, graph_mb, job)


def capped(args, rows, m, d, graph_mb, job):
    """P = 4 (2 with --quick): today's path (the coordinator loads data.graph and cuts it by range) and training
    from the parts, uncapped and then with every rank capped halfway between the two paths' largest peaks. Where
    the parts' full-graph epoch does not fit this machine as it is, its streamed halo (train.halo) is the new
    path, and every rank is capped at its share of the machine (machine_share) without the uncapped runs:
    today's path, whose coordinator holds about 3.4 graphs, cannot run here at all then."""
    p = 2 if args.quick else 4
    parts = os.path.join(WORK, f"memparts{m}-{p}")
    from_parts = ["--set", "data.format=partitions", "--set", "data.graph=", "--set", f"data.partitions={parts}"]
    cap, too_big = machine_share(predicted_worker_mb(job, p, from_parts), p)
    if too_big or cap:
        from_parts += ["--set", "train.halo=streamed"]
        cap, too_big = machine_share(predicted_worker_mb(job, p, from_parts), p)
        cap = cap or int(0.8 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e6 / p)
    if too_big:
        print(f"capped, P = {p}: {too_big}")
        rows.append({"section": "memory-capped", "edges_m": m, "ranks": p, "error": too_big})
        return
    h5 = d + ".h5"
    if not os.path.exists(h5):
        subprocess.run([TESSEL, "import", "chunked", d, "--add-inverse", "--add-self-loop", "--out", h5], check=True,
                       capture_output=True)
    paths = (("coordinator path", ["--set", "data.format=graph", "--set", f"data.graph={h5}",
                                   "--set", "partition.method=range"]),
             ("from parts" + (", streamed" if cap else ""), from_parts))
    need = {}
    for what, sets in paths if not cap else ():
        r = train(job, p, sets, f"need{m}-{p}-{what.split()[0]}")
        need[what] = max(peaks_of(r)) if "error" not in r else None
        print(f"uncapped, P = {p}, {what:<17}: " + (f"largest rank {need[what]:.0f} MB, rank 0 "
              f"{peaks_of(r)[0]:.0f} MB, {r['seconds']:.1f} s" if need[what] else f"failed ({r['error'][-80:]})"))
    if not cap:
        if not all(need.values()) or need["from parts"] >= need["coordinator path"]:
            rows.append({"section": "memory-capped", "edges_m": m, "ranks": p, "error": f"no cap between them: {need}"})
            return
        cap = int((need["from parts"] + need["coordinator path"]) / 2)
    for what, sets in paths:
        r = train(job, p, sets, f"cap{m}-{p}-{what.split()[0]}", cap_mb=cap)
        ok = "error" not in r
        print(f"capped at {cap} MB a rank, P = {p}, {what:<17}: " +
              (f"trained, {r['seconds']:.1f} s, largest rank {max(peaks_of(r)):.0f} MB" if ok else
               f"failed ({r['error'][-100:]!r})"))
        rows.append({"section": "memory-capped", "edges_m": m, "graph_mb": graph_mb, "ranks": p, "cap_mb": cap,
                     "what": what, "uncapped_max_rank_mb": need.get(what), "trained": ok,
                     "rank_peak_mb": peaks_of(r) if ok else [], "error": r.get("error"),
                     "target": "the coordinator path fails under the cap, from parts trains"})


def peers(args, rows):
    """DGL's partition_graph (METIS, one process, the same threads) beside Tessel's METIS path and the
    distributed methods on 2 ranks, 4 parts each, on the same graphs."""
    dgl_python = os.path.join(BUILD, "bench-venv-dgl", "bin", "python")
    graphs = [("fb15k-237",) + fb15k()]
    for m in args.sizes or ([10] + ([30] if args.full else [])):
        d, _ = memory_graph(m)
        if not os.path.exists(d + ".h5"):
            subprocess.run([TESSEL, "import", "chunked", d, "--add-inverse", "--add-self-loop", "--out", d + ".h5"],
                           check=True, capture_output=True)
        graphs.append((f"synthetic-{m}M", d + ".h5", d))
    print(f"\n{'graph':<15} {'who':<34} {'edge cut':>10} {'imbalance':>9} {'time s':>8} {'peak MB':>8}")

    def show(name, who, cut, imb, seconds, peak, r):
        print(f"{name:<15} {who:<34} {cut:>10} {imb:>9.3f} {seconds:>8.1f} {peak:>8.0f}", flush=True)
        rows.append({"section": "peers", "graph": name, "who": who, "parts": 4, "edge_cut": cut, "imbalance": imb,
                     "seconds": seconds, "peak_mb": peak, "detail": r})

    for name, h5, d in graphs:
        out = subprocess.run([dgl_python, os.path.join(HERE, "dgl_partition.py"), h5, "4",
                              os.path.join(WORK, f"dgl-{name}"), "2"], capture_output=True, text=True)
        if out.returncode != 0:
            rows.append({"section": "peers", "graph": name, "who": "dgl", "error": out.stderr[-400:]})
            print(f"{name:<15} {'dgl partition_graph':<30} failed: {out.stderr[-200:]}")
        else:
            r = json.loads(out.stdout.strip().splitlines()[-1])
            show(name, r["peer"], r["edge_cut"], max(r["imbalance"].values()), r["seconds"], r["peak_mb"], r)
        metis = partition_metis(h5, 4, f"peers-{name}-metis")
        show(name, "tessel partition G.h5 (metis)", metis["edge_cut"], metis["imbalance"], metis["seconds"],
             metis["peak_mb"], metis)
        # PT-Scotch's quality strategy takes over 20 minutes on the 10M graph with 1% training nodes here.
        for method in ("ptscotch", "stream") if name == "fb15k-237" or args.full else ("stream",):
            r = partition_dist(d, 2, method, 4, f"peers-{name}-{method}")
            show(name, f"tessel --input, 2 ranks ({method})", r["edge_cut"], r["imbalance"], r["seconds"],
                 max(r["rank_peak_mb"]), r)


def svg(rows, path):
    """The largest rank's peak against P: the scale section's rows, or else the memory section's partitions."""
    pts = [(f"{r['edges_m']}M x {r.get('feature_dim', 32)} {r['method']}", r) for r in rows
           if r.get("section") == "scale" and r.get("max_rank_peak_mb")]
    if not pts:
        pts = [(f"{r['edges_m']}M stream", r) for r in rows
               if r.get("section") == "memory" and r.get("what") == "partition (stream)" and r.get("max_rank_peak_mb")]
    if not pts:
        return
    series = {}
    for name, r in pts:
        series.setdefault(name, []).append((r["ranks"], r["max_rank_peak_mb"]))
    w, h, pad = 560, 340, 50
    ymax = max(v for s in series.values() for _, v in s) * 1.1
    xs = [1, 2, 4, 8]
    x = lambda p: pad + (xs.index(p) if p in xs else 0) * (w - 2 * pad) / (len(xs) - 1)
    y = lambda v: h - pad - v / ymax * (h - 2 * pad)
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
           f'<text x="{w/2}" y="16" text-anchor="middle">tessel partition --input: peak RSS of the largest rank</text>',
           f'<line x1="{pad}" y1="{h-pad}" x2="{w-pad}" y2="{h-pad}" stroke="black"/>',
           f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h-pad}" stroke="black"/>',
           f'<text x="{w/2}" y="{h-12}" text-anchor="middle">ranks P (K = P parts)</text>',
           f'<text x="14" y="{h/2}" transform="rotate(-90 14 {h/2})" text-anchor="middle">MB</text>']
    for p in xs:
        out.append(f'<text x="{x(p)}" y="{h-pad+14}" text-anchor="middle">{p}</text>')
    for i in range(5):
        v = ymax * i / 4
        out.append(f'<text x="{pad-4}" y="{y(v)+4}" text-anchor="end">{v:.0f}</text>')
    for i, (name, s) in enumerate(sorted(series.items())):
        c = colours[i % len(colours)]
        s.sort()
        out.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="' +
                   " ".join(f"{x(p):.1f},{y(v):.1f}" for p, v in s) + '"/>')
        out.append(f'<text x="{w-pad-150}" y="{pad+14*i}" fill="{c}">{name}</text>')
    out.append("</svg>")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--full", action="store_true", help="also 100M edges (feature width 8)")
    ap.add_argument("--sections", default="quality,scale")
    ap.add_argument("--json", default=os.path.join(BUILD, "bench", "results", "partition.json"))
    ap.add_argument("--svg", default=os.path.join(BUILD, "bench", "results", "partition-scale.svg"))
    ap.add_argument("--cases", type=lambda v: v.split(","), default=None, metavar="WHAT[,WHAT]",
                    help="memory: only the training runs whose name holds one of these (full-graph, streamed, "
                         "sampled) and, with \"capped\", the capped runs; the partitions' rows always")
    ap.add_argument("--sizes", type=lambda v: [int(x) for x in v.split(",")], default=None, metavar="M[,M]",
                    help="the generated graphs of the memory and peers sections, in millions of base edges")
    ap.add_argument("--plot", nargs="+", metavar="JSON",
                    help="only draw the SVG, from the rows of these JSON files (runs of other sizes together)")
    args = ap.parse_args()
    if args.plot:
        svg([r for f in args.plot for r in json.load(open(f))["rows"]], args.svg)
        return
    os.makedirs(WORK, exist_ok=True)
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    rows = []
    for section in args.sections.split(","):
        {"quality": quality, "scale": scale, "memory": memory, "peers": peers}[section](args, rows)
    with open(args.json, "w") as f:
        json.dump({"family": "partition", "rows": rows}, f, indent=2)
    print(f"wrote {args.json}")
    svg(rows, args.svg)


if __name__ == "__main__":
    main()
