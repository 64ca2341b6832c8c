"""The RGNN peers: full-graph training of RGCN, RGAT or HGT with PyTorch Geometric, DGL or plain PyTorch, on a
Tessel graph file, timed the way the benchmark times Tessel.

  python rgnn_peer.py --graph G.h5 --system pyg|dgl|torch --model rgcn|rgat|hgt --variant LAYER
                      [--threads 2] [--hidden 64] [--layers 2] [--heads 1] [--epochs 20] [--warmup 1]
                      [--max-seconds S] [--min-epochs 3] [--deadline S] [--lr 0.01] [--l2 5e-4] [--seed 0]
                      [--memory-fraction 0.7] [--json OUT]

Systems and variants (the layer class that does the work; bench/README.md "The peers"):
  pyg    rgcn: RGCNConv, FastRGCNConv    rgat: RGATConv          hgt: HGTConv (+ a Linear classifier)
  dgl    rgcn: RelGraphConv              rgat: GATConv, one per relation in HeteroGraphConv(aggregate="sum")
         hgt: HGTConv (+ a Linear classifier)
  torch  rgcn: compact, the model hand-written in eager PyTorch the way Tessel computes it
         (rgcn_torch.CompactRgcnLayer); a reference, never a baseline
The pyg and torch systems run in build/bench-venv (torch 2.15 + PyG 2.8), dgl in build/bench-venv-dgl
(torch 2.2.1 + DGL 2.1.0); this file imports only what its system needs.

The models follow workers/rgnn/MODELS.md as closely as each library allows: widths d_0 = features (or
one-hot node ids, RGCN only), hidden H, classes C; RGCN mean-normalised per relation with no root weight and
no bias, ReLU between RGCN/RGAT layers; L HGT layers then a bias-free Linear H -> C; softmax cross-entropy
over the train mask; Adam (lr 0.01) with Tessel's train.l2 = --l2 (the penalty l2 * sum(w^2), so
weight_decay = 2 * l2) on layer 1's parameters only. What
a library cannot express is listed in bench/README.md ("Model differences"). RGCN variants all start from
the same weights (numpy glorot from --seed, copied into each layer), so their losses agree across systems.

One epoch = zero_grad + forward + loss (the "forward" phase), then backward + optimizer step (the
"backward" phase), each timed with perf_counter; `warmup` untimed epochs first. The timed epochs stop
early once --max-seconds of them have run and at least --min-epochs were timed. --deadline S bounds the
whole process (import, graph load, setup, epochs): past it the timed epochs stop, with status "ok" if at
least one was timed, else "timeout". An allocation failure (the RLIMIT_DATA cap of --memory-fraction, or
the machine) is status "oom". Prints one JSON object on stdout and writes it to --json. Exit 0 for ok,
oom and timeout, 1 for any other error.
"""
import argparse
import json
import os
import re
import resource
import signal
import statistics
import sys
import time
import traceback
import warnings

import numpy as np

import graphfile

T_START = time.monotonic()

VARIANTS = {
    ("pyg", "rgcn"): ("RGCNConv", "FastRGCNConv"),
    ("pyg", "rgat"): ("RGATConv",),
    ("pyg", "hgt"): ("HGTConv",),
    ("dgl", "rgcn"): ("RelGraphConv",),
    ("dgl", "rgat"): ("GATConv",),
    ("dgl", "hgt"): ("HGTConv",),
    ("torch", "rgcn"): ("compact",),
}


class DeadlineExceeded(BaseException):
    """Not an Exception: library code that catches Exception (to try a fallback) must not swallow it."""


def cap_memory(fraction: float) -> int:
    """Caps private writable memory (RLIMIT_DATA) at `fraction` of MemAvailable, so that a variant that
    needs more fails with an allocation error instead of pushing the shared machine into the OOM killer."""
    try:
        with open("/proc/meminfo") as f:
            info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f}
        cap = int(info["MemAvailable"] * fraction)
        resource.setrlimit(resource.RLIMIT_DATA, (cap, resource.getrlimit(resource.RLIMIT_DATA)[1]))
        return cap
    except (OSError, KeyError, ValueError):
        return 0


def blas_info(torch) -> str:
    cfg = torch.__config__.show()
    m = re.search(r"BLAS_INFO=([^,\s]+)", cfg)
    blas = m.group(1) if m else "unknown"
    lib = next((line.strip(" -") for line in cfg.splitlines()
                if "Math Kernel Library" in line or "OpenBLAS" in line), "")
    return f"{blas} ({lib})" if lib else blas


def glorot(rng, shape) -> np.ndarray:
    """Glorot uniform over the last two dimensions (MODELS.md "Initialisation"), as float32."""
    bound = np.sqrt(6.0 / (shape[-2] + shape[-1]))
    return rng.uniform(-bound, bound, shape).astype(np.float32)


def mean_norm(g) -> np.ndarray:
    """1 / |N_r(i)| for every edge (j -> i, r): RGCN's per-relation mean."""
    key = g.etype * g.num_nodes + g.dst
    _, inv, count = np.unique(key, return_inverse=True, return_counts=True)
    return (1.0 / count[inv]).astype(np.float32)


def type_names(g):
    """Names for the node types and relations as the libraries' heterogeneous APIs key them."""
    ntypes = [f"n{t}_{name}"[:40] for t, name in enumerate(g.node_type_names)]
    rels = [f"r{r}" for r in range(g.num_relations)]
    return ntypes, rels


def split_types(torch, x, g):
    """Global [N, d] -> {node type name: [n_t, d]} (global ids are grouped by node type)."""
    ntypes, _ = type_names(g)
    off = g.node_type_offsets
    return {ntypes[t]: x[off[t]:off[t + 1]] for t in range(g.num_node_types)}


def widths(g, x, hidden: int, layers: int) -> list:
    d0 = g.num_nodes if x is None else x.shape[1]
    return [d0] + [hidden] * (layers - 1) + [g.num_classes]


# ---- models ------------------------------------------------------------------------------------------
# Each builder returns (forward: () -> logits [N, C] in global node order, first: [params of layer 1],
# rest: [every other parameter], info: dict recorded in the result).

def build_pyg(torch, a, g, x):
    import torch_geometric
    from torch_geometric.nn import FastRGCNConv, HGTConv, RGATConv, RGCNConv
    import torch.nn.functional as F

    info = {"torch_geometric": torch_geometric.__version__,
            "pyg_extensions": {k: bool(getattr(torch_geometric.typing, k, False))
                               for k in ("WITH_PYG_LIB", "WITH_SEGMM", "WITH_TORCH_SCATTER",
                                         "WITH_TORCH_SPARSE")}}
    edge_index = torch.from_numpy(np.stack([g.src, g.dst])).to(a.device)
    edge_type = torch.from_numpy(g.etype).to(a.device)
    if a.model == "rgcn":
        conv = RGCNConv if a.variant == "RGCNConv" else FastRGCNConv
        dims = widths(g, x, a.hidden, a.layers)
        rng = np.random.default_rng(a.seed)
        # Edges are grouped by relation in the file, so is_sorted holds.
        convs = torch.nn.ModuleList(
            conv(dims[i], dims[i + 1], g.num_relations, aggr="mean", root_weight=False, bias=False, is_sorted=True)
            for i in range(a.layers)).to(a.device)
        with torch.no_grad():
            for c, i in zip(convs, range(a.layers)):
                c.weight.copy_(torch.from_numpy(glorot(rng, (g.num_relations, dims[i], dims[i + 1]))))

        def forward():
            h = x
            for i, c in enumerate(convs):
                h = c(h, edge_index, edge_type)
                if i + 1 < len(convs):
                    h = F.relu(h)
            return h
        return forward, list(convs[0].parameters()), [p for c in convs[1:] for p in c.parameters()], info

    if x is None:
        raise ValueError(f"{a.model} needs node features; {a.graph} has none (run add_features.py)")
    if a.model == "rgat":
        dims = widths(g, x, a.hidden, a.layers)
        convs = torch.nn.ModuleList()
        for i in range(a.layers):
            last = i + 1 == a.layers
            # MODELS.md: hidden layers concatenate H / heads per head; the last averages heads of width C.
            out = dims[i + 1] if last else dims[i + 1] // a.heads
            convs.append(RGATConv(dims[i], out, g.num_relations, heads=a.heads, concat=not last, bias=False,
                                  attention_mechanism="across-relation", attention_mode="additive-self-attention",
                                  negative_slope=0.2, dropout=0.0).to(a.device))

        def forward():
            h = x
            for i, c in enumerate(convs):
                h = c(h, edge_index, edge_type)
                if i + 1 < len(convs):
                    h = F.relu(h)
            return h
        return forward, list(convs[0].parameters()), [p for c in convs[1:] for p in c.parameters()], info

    # hgt: per node type dict inputs, one edge type per relation.
    ntypes, rels = type_names(g)
    off = g.node_type_offsets
    edge_index_dict = {}
    for r in range(g.num_relations):
        st, dt = int(g.rel_src_type[r]), int(g.rel_dst_type[r])
        lo, hi = g.rel_ptr[r], g.rel_ptr[r + 1]
        edge_index_dict[(ntypes[st], rels[r], ntypes[dt])] = torch.from_numpy(
            np.stack([g.src[lo:hi] - off[st], g.dst[lo:hi] - off[dt]])).to(a.device)
    metadata = (ntypes, list(edge_index_dict))
    x_dict = split_types(torch, x, g)
    convs = torch.nn.ModuleList(HGTConv(x.shape[1] if i == 0 else a.hidden, a.hidden, metadata, heads=a.heads)
                                for i in range(a.layers)).to(a.device)
    classifier = torch.nn.Linear(a.hidden, g.num_classes, bias=False).to(a.device)

    def forward():
        h = x_dict
        for c in convs:
            h = c(h, edge_index_dict)
        return classifier(torch.cat([h[t] for t in ntypes]))
    return (forward, list(convs[0].parameters()),
            [p for c in convs[1:] for p in c.parameters()] + list(classifier.parameters()), info)


def build_dgl(torch, a, g, x):
    os.environ.setdefault("DGLBACKEND", "pytorch")
    import dgl
    import dgl.nn as dglnn
    import torch.nn.functional as F

    dgl.utils.set_num_threads(a.threads)  # DGL's own OpenMP pool does not follow torch's
    info = {"dgl": dgl.__version__}
    if x is None:
        raise ValueError(f"the DGL peers need node features; {a.graph} has none (run add_features.py)")
    src, dst = torch.from_numpy(g.src), torch.from_numpy(g.dst)
    etype = torch.from_numpy(g.etype)
    dims = widths(g, x, a.hidden, a.layers)
    if a.model == "rgcn":
        graph = dgl.graph((src, dst), num_nodes=g.num_nodes)
        norm = torch.from_numpy(mean_norm(g)).unsqueeze(1)
        rng = np.random.default_rng(a.seed)
        convs = torch.nn.ModuleList(
            dglnn.RelGraphConv(dims[i], dims[i + 1], g.num_relations, regularizer=None, bias=False,
                               self_loop=False, activation=None, dropout=0.0)
            for i in range(a.layers)).to(a.device)
        with torch.no_grad():
            for c, i in zip(convs, range(a.layers)):
                c.linear_r.W.copy_(torch.from_numpy(glorot(rng, (g.num_relations, dims[i], dims[i + 1]))))

        def forward():
            h = x
            for i, c in enumerate(convs):
                h = c(graph, h, etype, norm, presorted=True)  # edges are grouped by relation in the file
                if i + 1 < len(convs):
                    h = F.relu(h)
            return h
        return forward, list(convs[0].parameters()), [p for c in convs[1:] for p in c.parameters()], info

    ntypes, rels = type_names(g)
    off = g.node_type_offsets
    if a.model == "rgat":
        data = {}
        for r in range(g.num_relations):
            st, dt = int(g.rel_src_type[r]), int(g.rel_dst_type[r])
            lo, hi = g.rel_ptr[r], g.rel_ptr[r + 1]
            data[(ntypes[st], rels[r], ntypes[dt])] = (src[lo:hi] - int(off[st]), dst[lo:hi] - int(off[dt]))
        graph = dgl.heterograph(data, num_nodes_dict={ntypes[t]: int(off[t + 1] - off[t])
                                                      for t in range(g.num_node_types)})
        x_dict = split_types(torch, x, g)
        convs = torch.nn.ModuleList()
        for i in range(a.layers):
            last = i + 1 == a.layers
            out = dims[i + 1] if last else dims[i + 1] // a.heads
            convs.append(dglnn.HeteroGraphConv(
                {rel: dglnn.GATConv(dims[i], out, a.heads, feat_drop=0.0, attn_drop=0.0, negative_slope=0.2,
                                    residual=False, activation=None, allow_zero_in_degree=True, bias=False)
                 for rel in rels}, aggregate="sum"))

        def forward():
            h = x_dict
            for i, c in enumerate(convs):
                h = c(graph, h)  # {ntype: [n, heads, out]}
                if i + 1 < len(convs):
                    h = {t: F.relu(v.flatten(1)) for t, v in h.items()}  # concat heads
                else:
                    h = {t: v.mean(1) for t, v in h.items()}             # average heads
            return torch.cat([h[t] for t in ntypes])
        return forward, list(convs[0].parameters()), [p for c in convs[1:] for p in c.parameters()], info

    # hgt: the homogeneous graph with node and edge type vectors; both are sorted by type in the file.
    graph = dgl.graph((src, dst), num_nodes=g.num_nodes)
    ntype = torch.from_numpy(g.node_type)
    convs = torch.nn.ModuleList(
        dglnn.HGTConv(dims[0] if i == 0 else a.hidden, a.hidden // a.heads, a.heads, g.num_node_types,
                      g.num_relations, dropout=0.0, use_norm=False)
        for i in range(a.layers))
    classifier = torch.nn.Linear(a.hidden, g.num_classes, bias=False)

    def forward():
        h = x
        for c in convs:
            h = c(graph, h, ntype, etype, presorted=True)
        return classifier(h)
    return (forward, list(convs[0].parameters()),
            [p for c in convs[1:] for p in c.parameters()] + list(classifier.parameters()), info)


def build_torch(torch, a, g, x):
    from rgcn_torch import CompactRgcnLayer

    dims = widths(g, x, a.hidden, a.layers)
    rng = np.random.default_rng(a.seed)
    convs = torch.nn.ModuleList(CompactRgcnLayer(torch, g, dims[i], dims[i + 1], onehot=(i == 0 and x is None))
                                for i in range(a.layers))
    with torch.no_grad():
        for c, i in zip(convs, range(a.layers)):
            c.weight.copy_(torch.from_numpy(glorot(rng, (g.num_relations, dims[i], dims[i + 1]))))
    import torch.nn.functional as F

    def forward():
        h = x
        for i, c in enumerate(convs):
            h = c(h)
            if i + 1 < len(convs):
                h = F.relu(h)
        return h
    return forward, list(convs[0].parameters()), [p for c in convs[1:] for p in c.parameters()], {}


def make_adam(torch, groups, lr):
    """The fastest documented Adam on CPU: fused (torch >= 2.4), else foreach (multi-tensor), else the loop."""
    # Fresh group dicts every try: Optimizer writes its defaults (fused=...) into the dicts it is given.
    fresh = lambda: [{"params": list(g["params"]), "weight_decay": g["weight_decay"]} for g in groups]
    for kind in ("fused", "foreach"):
        try:
            return torch.optim.Adam(fresh(), lr=lr, **{kind: True}), kind
        except (RuntimeError, TypeError, ValueError):
            continue
    return torch.optim.Adam(fresh(), lr=lr), "default"


def median_ms(values):
    return 1e3 * statistics.median(values) if values else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph", required=True)
    ap.add_argument("--system", choices=["pyg", "dgl", "torch"], required=True)
    ap.add_argument("--model", choices=["rgcn", "rgat", "hgt"], required=True)
    ap.add_argument("--variant", required=True, help="the layer class (see above)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cuda: the pyg system on the GPU, timed after a device synchronise; "
                         "peak memory is then the GPU allocator's peak")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--max-seconds", type=float, default=0,
                    help="stop timing once this many seconds of timed epochs have passed and at least "
                         "--min-epochs were timed (0 = no limit)")
    ap.add_argument("--min-epochs", type=int, default=3)
    ap.add_argument("--deadline", type=float, default=0,
                    help="seconds from the start of the process after which the epochs stop (0 = none)")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--l2", type=float, default=5e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--memory-fraction", type=float, default=0.7,
                    help="cap on private memory, as a fraction of MemAvailable at start (0 = no cap)")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    if a.variant not in VARIANTS.get((a.system, a.model), ()):
        ap.error(f"--system {a.system} --model {a.model}: variants are "
                 f"{', '.join(VARIANTS.get((a.system, a.model), ())) or 'none'}")
    if a.device == "cuda" and a.system != "pyg":
        ap.error("--device cuda: only the pyg system runs on the GPU here")
    if a.model != "rgcn" and a.hidden % a.heads:
        ap.error("--hidden must be divisible by --heads")

    # Before torch loads: its OpenMP and MKL pools size themselves from these.
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    os.environ["MKL_NUM_THREADS"] = str(a.threads)
    if a.deadline > 0:
        def on_alarm(signum, frame):
            raise DeadlineExceeded()
        signal.signal(signal.SIGALRM, on_alarm)
        # Fires again every 5 s in case library code swallowed it, until the process cancels it.
        signal.setitimer(signal.ITIMER_REAL, max(0.1, a.deadline - (time.monotonic() - T_START)), 5.0)
    import torch
    import torch.nn.functional as F
    warnings.filterwarnings("ignore", category=FutureWarning)  # PyG's use of torch.jit on import
    warnings.filterwarnings("ignore", category=UserWarning)

    torch.set_num_threads(a.threads)
    result = {
        "system": a.system, "model": a.model, "variant": a.variant, "peer": f"{a.system}-{a.variant}",
        "graph": a.graph, "threads": torch.get_num_threads(), "hidden": a.hidden, "layers": a.layers,
        "heads": a.heads, "epochs": a.epochs, "warmup": a.warmup, "device": a.device,
        "torch": torch.__version__, "blas": blas_info(torch),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "status": "error", "error": None,
    }
    cap = cap_memory(a.memory_fraction) if a.memory_fraction > 0 else 0
    result["memory_cap_bytes"] = cap
    times, fwd_times, bwd_times, losses = [], [], [], []
    cut = None
    try:
        g = graphfile.load(a.graph)
        if g.num_classes <= 0 or not g.train.any():
            raise ValueError(f"{a.graph}: no labels or no training nodes (run add_features.py first)")
        torch.manual_seed(a.seed)
        x = None if g.features is None else torch.from_numpy(g.features).to(a.device)
        y = torch.from_numpy(g.labels).to(a.device)
        train_idx = torch.from_numpy(np.flatnonzero(g.train)).to(a.device)
        test_idx = torch.from_numpy(np.flatnonzero(g.test)).to(a.device)
        sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
        build = {"pyg": build_pyg, "dgl": build_dgl, "torch": build_torch}[a.system]
        forward, first, rest, info = build(torch, a, g, x)
        result.update(info)
        if a.system == "dgl":
            import dgl
            result["dgl_threads"] = dgl.utils.get_num_threads()
        # The penalty l2 * sum(w^2) on layer 1 only: its gradient, 2 * l2 * w (MODELS.md "Objective").
        groups = [{"params": first, "weight_decay": 2 * a.l2}, {"params": rest, "weight_decay": 0.0}]
        opt, result["adam"] = make_adam(torch, groups, a.lr)
        result.update(nodes=g.num_nodes, edges=g.num_edges, relations=g.num_relations,
                      node_types=g.num_node_types, classes=g.num_classes,
                      input="onehot" if x is None else "features", input_dim=0 if x is None else x.shape[1],
                      params=sum(p.numel() for p in first + rest),
                      setup_seconds=round(time.monotonic() - T_START, 3))
        try:
            for epoch in range(a.warmup + a.epochs):
                sync()
                t0 = time.perf_counter()
                opt.zero_grad(set_to_none=True)
                out = forward()
                loss = F.cross_entropy(out[train_idx], y[train_idx])
                sync()
                t1 = time.perf_counter()
                loss.backward()
                opt.step()
                sync()
                t2 = time.perf_counter()
                losses.append(float(loss.detach()))
                del out, loss
                if epoch >= a.warmup:
                    times.append(t2 - t0)
                    fwd_times.append(t1 - t0)
                    bwd_times.append(t2 - t1)
                    if a.max_seconds > 0 and len(times) >= a.min_epochs and sum(times) >= a.max_seconds:
                        cut = "max-seconds"
                        break
                    # Stop rather than be cut mid-epoch when the next epoch would pass the deadline.
                    if a.deadline > 0 and time.monotonic() - T_START + (t2 - t0) > a.deadline:
                        cut = "deadline"
                        break
        except DeadlineExceeded:
            cut = "deadline"
        signal.setitimer(signal.ITIMER_REAL, 0)
        if not times:
            raise DeadlineExceeded()
        result.update(status="ok", epoch_seconds=times, forward_seconds=fwd_times, backward_seconds=bwd_times,
                      epochs_timed=len(times), median_ms=median_ms(times), forward_median_ms=median_ms(fwd_times),
                      backward_median_ms=median_ms(bwd_times), epoch_loss=losses, cut_by=cut)
        # Accuracy, when one more forward fits in the deadline (it is not timed).
        if a.deadline <= 0 or time.monotonic() - T_START + 2 * min(fwd_times) < a.deadline:
            with torch.no_grad():
                pred = forward().argmax(1)
            acc = lambda idx: float((pred[idx] == y[idx]).float().mean()) if idx.numel() else None
            result.update(train_accuracy=acc(train_idx), test_accuracy=acc(test_idx))
    except DeadlineExceeded:
        signal.setitimer(signal.ITIMER_REAL, 0)
        result.update(status="timeout", epochs_timed=0, epoch_loss=losses,
                      error=f"no timed epoch within the {a.deadline:.0f} s deadline "
                            f"({len(losses)} epoch(s) ran, setup {result.get('setup_seconds', 'not finished')} s)")
    except (RuntimeError, MemoryError) as e:
        signal.setitimer(signal.ITIMER_REAL, 0)
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if isinstance(e, MemoryError) or "alloc" in msg.lower() or "memory" in msg.lower():
            result.update(status="oom", error=msg[:300])
        else:
            result.update(status="error", error=msg[:300])
            traceback.print_exc()
    except Exception as e:  # noqa: BLE001 - every failure becomes a row, with the traceback on stderr
        signal.setitimer(signal.ITIMER_REAL, 0)
        msg = f"{type(e).__name__}: {e}"
        # DGL wraps C++ allocation failures in DGLError.
        result.update(status="oom" if "alloc" in msg.lower() or "out of memory" in msg.lower() else "error",
                      error=msg[:300])
        if result["status"] == "error":
            traceback.print_exc()
    result["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if a.device == "cuda":
        result["peak_gpu_bytes"] = torch.cuda.max_memory_allocated()
    result["wall_seconds"] = round(time.monotonic() - T_START, 3)
    text = json.dumps(result)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0 if result["status"] in ("ok", "oom", "timeout") else 1


if __name__ == "__main__":
    sys.exit(main())
