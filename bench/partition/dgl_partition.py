"""DGL's dgl.distributed.partition_graph on a Tessel graph file, the peer of `tessel partition`
(bench/run.sh peers-partition): METIS on one machine, DistDGL's documented path for a graph that fits it,
with the training nodes and the edges balanced (balance_ntypes, balance_edges), as Tessel balances them.

The graph is the file's (inverse and self-loop relations included), one node and one edge space as Tessel
partitions it, with its features written into the parts as Tessel writes them. Prints one JSON line:
load and partition seconds, peak RSS (the process's, loading included, as /usr/bin/time gives Tessel's),
edge cut (distinct node pairs across parts, self-loops left out: Tessel's EdgeCut) and the imbalance of
nodes, training nodes and in-edges (a part's share over the mean).

  python dgl_partition.py GRAPH.h5 PARTS OUT_DIR THREADS
"""
import json
import os
import resource
import shutil
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "peers"))
import graphfile  # noqa: E402
import numpy as np  # noqa: E402


def main():
    path, parts, out, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import dgl
    import torch
    torch.set_num_threads(threads)
    t0 = time.monotonic()
    g = graphfile.load(path)
    hg = dgl.graph((torch.from_numpy(g.src), torch.from_numpy(g.dst)), num_nodes=g.num_nodes)
    if g.features is not None:
        hg.ndata["feat"] = torch.from_numpy(g.features)
    hg.ndata["label"] = torch.from_numpy(g.labels)
    train = torch.from_numpy(g.train.astype(np.int64))
    hg.ndata["train_mask"] = train
    load_s = time.monotonic() - t0
    shutil.rmtree(out, ignore_errors=True)
    t1 = time.monotonic()
    orig_nids, _ = dgl.distributed.partition_graph(hg, "g", parts, out, part_method="metis", balance_ntypes=train,
                                                   balance_edges=True, return_mapping=True)
    part_s = time.monotonic() - t1
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
    config = json.load(open(os.path.join(out, "g.json")))
    ranges = np.array(config["node_map"]["_N"], dtype=np.int64)  # [parts, 2] over new ids
    part_of_new = np.repeat(np.arange(parts, dtype=np.int64), ranges[:, 1] - ranges[:, 0])
    part_of = np.empty(g.num_nodes, dtype=np.int64)
    part_of[orig_nids.numpy()] = part_of_new
    ps, pd = part_of[g.src], part_of[g.dst]
    cross = (ps != pd) & (g.src != g.dst)
    lo, hi = np.minimum(g.src[cross], g.dst[cross]), np.maximum(g.src[cross], g.dst[cross])
    edge_cut = int(np.unique(lo * np.int64(g.num_nodes) + hi).size)

    def imbalance(weights):
        per = np.bincount(part_of, weights=weights, minlength=parts)
        return float(per.max() / (per.sum() / parts)) if per.sum() > 0 else 1.0

    in_edges = np.bincount(g.dst, minlength=g.num_nodes).astype(np.float64)
    shutil.rmtree(out, ignore_errors=True)
    print(json.dumps({"peer": f"dgl {dgl.__version__} partition_graph (metis)", "parts": parts, "threads": threads,
                      "load_seconds": load_s, "seconds": part_s, "peak_mb": peak_mb, "edge_cut": edge_cut,
                      "imbalance": {"nodes": imbalance(None), "train": imbalance(g.train.astype(np.float64)),
                                    "edges": imbalance(in_edges)}}))


if __name__ == "__main__":
    main()
