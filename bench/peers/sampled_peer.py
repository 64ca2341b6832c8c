"""Sampled mini-batch R-GCN in a peer framework, for `bench/run.sh peers-sampled`: the same graph file,
model, fanouts, batch size and threads as Tessel's sampled job, and the seeds per second it trains.

  dgl  dgl.dataloading.NeighborSampler(fanouts) + DataLoader over the training nodes (shuffled), two
       RelGraphConv layers (no bases, no bias, no self-loop term: the graph has self-loop relations) on
       the sampled blocks, each edge weighted 1 / |N_r(i)| of the block as Tessel's RGCN, Adam.
       The DataLoader samples in the training process (num_workers = 0) or in one extra process
       (num_workers = 1, as Tessel's prefetch thread); both are measured and the faster one reported.
  pyg  torch_geometric.loader.NeighborLoader + RGCNConv. NeighborLoader needs pyg-lib or torch-sparse,
       which PyPI has no wheels of for the torch in build/bench-venv: it reports itself unavailable then.
       --device cuda trains on the GPU as PyG's examples do: the loader samples and gathers each batch on
       the host, the batch is copied to the GPU (non_blocking), and the timing ends with a synchronize.

Fanouts are given input layer first, as Tessel and DGL take them (PyG's num_neighbors is reversed here).
Timing: `--warmup` batches, then batches until `--batches` or `--max-seconds`; seeds per second over
the timed batches (sampling, feature gather, forward, backward and Adam all inside).
Prints one JSON object (and writes it to --json).
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from graphfile import load as read_graph  # noqa: E402


def run_dgl(a, g, torch):
    os.environ.setdefault("DGLBACKEND", "pytorch")
    import dgl
    import dgl.nn as dglnn
    import torch.nn.functional as F

    dgl.utils.set_num_threads(a.threads)
    graph = dgl.graph((torch.from_numpy(g.src), torch.from_numpy(g.dst)), num_nodes=g.num_nodes)
    graph.edata["etype"] = torch.from_numpy(g.etype)
    feats = torch.from_numpy(g.features)
    labels = torch.from_numpy(g.labels)
    train = torch.from_numpy(np.nonzero(g.train & (g.labels >= 0))[0])
    dims = [feats.shape[1]] + [a.hidden] * (a.layers - 1) + [g.num_classes]
    torch.manual_seed(a.seed)
    convs = torch.nn.ModuleList(dglnn.RelGraphConv(dims[i], dims[i + 1], g.num_relations, regularizer=None, bias=False,
                                                   self_loop=False) for i in range(a.layers))
    opt = torch.optim.Adam(convs.parameters(), lr=a.lr)
    results = []
    for workers in (0, 1):
        sampler = dgl.dataloading.NeighborSampler(a.fanouts)
        loader = dgl.dataloading.DataLoader(graph, train, sampler, batch_size=a.batch_size, shuffle=True,
                                            drop_last=False, num_workers=workers)
        done = seeds = 0
        start = None
        for input_nodes, output_nodes, blocks in loader:
            if done == a.warmup:
                start = time.perf_counter()
                seeds = 0
            h = feats[input_nodes]
            for i, (conv, block) in enumerate(zip(convs, blocks)):
                et = block.edata["etype"]
                _, dst = block.edges()
                key = et * block.num_dst_nodes() + dst
                count = torch.bincount(key, minlength=g.num_relations * block.num_dst_nodes()).float()
                norm = (1.0 / count[key]).unsqueeze(1)
                h = conv(block, h, et, norm)
                if i + 1 < len(convs):
                    h = F.relu(h)
            loss = F.cross_entropy(h, labels[output_nodes])
            opt.zero_grad()
            loss.backward()
            opt.step()
            done += 1
            seeds += len(output_nodes)
            if start is not None and (done - a.warmup >= a.batches or time.perf_counter() - start > a.max_seconds):
                break
        seconds = time.perf_counter() - start if start else float("nan")
        results.append({"num_workers": workers, "batches": done - a.warmup, "seconds": seconds,
                        "seeds_per_second": seeds / seconds if start else 0.0, "last_loss": float(loss)})
    best = max(results, key=lambda r: r["seeds_per_second"])
    return {"system": "dgl", "variant": "NeighborSampler+RelGraphConv", "dgl": dgl.__version__,
            "seeds_per_second": best["seeds_per_second"], "runs": results}


def run_pyg(a, g, torch):
    import torch_geometric
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader
    from torch_geometric.nn import RGCNConv
    import torch.nn.functional as F

    data = Data(x=torch.from_numpy(g.features), edge_index=torch.from_numpy(np.stack([g.src, g.dst])),
                edge_type=torch.from_numpy(g.etype), y=torch.from_numpy(g.labels), num_nodes=g.num_nodes)
    train = torch.from_numpy(np.nonzero(g.train & (g.labels >= 0))[0])
    try:
        loader = NeighborLoader(data, num_neighbors=list(reversed(a.fanouts)), input_nodes=train,
                                batch_size=a.batch_size, shuffle=True)
        batch = next(iter(loader))
    except Exception as e:  # noqa: BLE001 - reported, not hidden
        return {"system": "pyg", "variant": "NeighborLoader+RGCNConv", "unavailable": f"{type(e).__name__}: {e}",
                "pyg": torch_geometric.__version__}
    dims = [g.features.shape[1]] + [a.hidden] * (a.layers - 1) + [g.num_classes]
    torch.manual_seed(a.seed)
    convs = torch.nn.ModuleList(RGCNConv(dims[i], dims[i + 1], g.num_relations, aggr="mean", bias=False,
                                         root_weight=False) for i in range(a.layers)).to(a.device)
    opt = torch.optim.Adam(convs.parameters(), lr=a.lr)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    done = seeds = 0
    start = None
    for batch in loader:
        if done == a.warmup:
            sync()
            start = time.perf_counter()
            seeds = 0
        batch = batch.to(a.device, non_blocking=True)
        h = batch.x
        for i, conv in enumerate(convs):
            h = conv(h, batch.edge_index, batch.edge_type)
            if i + 1 < len(convs):
                h = F.relu(h)
        n = batch.batch_size
        loss = F.cross_entropy(h[:n], batch.y[:n])
        opt.zero_grad()
        loss.backward()
        opt.step()
        done += 1
        seeds += n
        if start is not None and (done - a.warmup >= a.batches or time.perf_counter() - start > a.max_seconds):
            break
    sync()
    seconds = time.perf_counter() - start if start else float("nan")
    return {"system": "pyg", "variant": "NeighborLoader+RGCNConv", "pyg": torch_geometric.__version__,
            "device": a.device,
            "seeds_per_second": seeds / seconds if start else 0.0, "batches": done - a.warmup, "seconds": seconds}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph", required=True)
    ap.add_argument("--system", choices=["dgl", "pyg"], required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--fanouts", default="10,10", help="input layer first, as Tessel's train.fanouts")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batches", type=int, default=40)
    ap.add_argument("--max-seconds", type=float, default=120)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="pyg: where the model trains")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    if a.device != "cpu" and a.system != "pyg":
        ap.error("--device cuda is for --system pyg")
    a.fanouts = [int(f) for f in a.fanouts.split(",")]
    import torch
    torch.set_num_threads(a.threads)
    g = read_graph(a.graph)
    if g.features is None:
        raise SystemExit(f"{a.graph} has no node features")
    out = run_dgl(a, g, torch) if a.system == "dgl" else run_pyg(a, g, torch)
    out.update({"graph": a.graph, "threads": a.threads, "fanouts": a.fanouts, "batch_size": a.batch_size,
                "hidden": a.hidden, "layers": a.layers, "torch": torch.__version__,
                "blas": "mkl" if torch.backends.mkl.is_available() else "?"})
    print(json.dumps(out))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
