"""The RGCN peers in PyTorch, full-graph training on a Tessel graph file.

  python rgcn_torch.py --graph G.h5 --variant rgcn|fast|compact [--threads 2] [--hidden 64] [--layers 2]
                       [--epochs 20] [--warmup 1] [--max-seconds S] [--lr 0.01] [--l2 5e-4] [--seed 0]
                       [--json OUT]

Variants: `rgcn` and `fast` are PyTorch Geometric's RGCNConv and FastRGCNConv, the peers. `compact` is
not a library: it is the same model written directly in PyTorch the way Tessel computes it (Hector's
compact materialization: W_r applied once per unique (relation, source) pair, then a sparse mean
aggregation), a reference for what eager PyTorch on the same BLAS can do.

The model is the one Tessel trains (bench/README.md "The RGCN benchmark"): per relation r a weight W_r, mean
aggregation over N_r(i) (1/|N_r(i)|), no root weight and no bias (the graph file already holds the
self-loop relation), ReLU between layers, softmax cross-entropy on the training nodes, Adam with L2
(weight_decay) on the first layer only. A graph without features gets a one-hot input (x = None, layer 1
is [R, N, hidden]); one with features gets a typed linear [R, d, hidden].

One epoch = zero_grad + forward + loss + backward + optimizer step, timed with perf_counter after
`warmup` untimed epochs (--max-seconds may cut the timed epochs short; epochs_timed says how many ran).
Prints one JSON object on stdout (and writes it to --json): the per-epoch seconds, their median, peak
RSS, versions and the BLAS torch was built with. An allocation failure (the RLIMIT_DATA cap of
--memory-fraction, or the machine) is reported as status "oom", not a crash; exit code 0
either way, 1 on any other error.
"""
import argparse
import json
import os
import re
import resource
import statistics
import sys
import time
import traceback
import warnings

import numpy as np

import graphfile


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


def CompactRgcnLayer(torch, g, d_in: int, d_out: int, onehot: bool):
    """One RGCN layer computed as Tessel computes it: gather the unique (relation, source) rows, one GEMM
    per relation on its rows (a row gather of W for a one-hot input), then out = A @ messages with the
    sparse [N, pairs] matrix A holding 1/|N_r(i)|. Same parameter shape and initialisation as PyG's
    RGCNConv ([R, d_in, d_out], glorot), so with the same seed it starts from the same weights."""
    import numpy as np
    from torch_geometric.nn.inits import glorot

    # Unique (relation, src) pairs, grouped by relation because etype is.
    key = g.etype * g.num_nodes + g.src
    pair_key, edge_pair = np.unique(key, return_inverse=True)
    pair_rel = pair_key // g.num_nodes
    pair_src = pair_key % g.num_nodes
    pair_ptr = np.searchsorted(pair_rel, np.arange(g.num_relations + 1))
    deg_key = g.etype * g.num_nodes + g.dst
    _, deg_inv, deg_count = np.unique(deg_key, return_inverse=True, return_counts=True)
    norm = (1.0 / deg_count[deg_inv]).astype(np.float32)
    # A[dst, pair] = sum of 1/|N_r(dst)| over the edges. Forward is A @ M and backward A^T @ G, each one
    # CSR sparse-dense product (torch's own backward for a CSR product transposes A every call).
    with torch.sparse.check_sparse_tensor_invariants(False), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        coo = torch.sparse_coo_tensor(torch.from_numpy(np.stack([g.dst, edge_pair])), torch.from_numpy(norm),
                                      (g.num_nodes, pair_key.size)).coalesce()
        adj = coo.to_sparse_csr()
        adj_t = coo.t().coalesce().to_sparse_csr()

    class Aggregate(torch.autograd.Function):
        @staticmethod
        def forward(ctx, msg):
            return adj @ msg

        @staticmethod
        def backward(ctx, grad):
            return adj_t @ grad

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.empty(g.num_relations, d_in, d_out))
            glorot(self.weight)
            self.register_buffer("pair_src", torch.from_numpy(pair_src))
            self.register_buffer("row", torch.from_numpy(pair_rel * d_in + pair_src) if onehot else None)
            self.sizes = np.diff(pair_ptr).tolist()

        def forward(self, h, edge_index=None, edge_type=None):
            if onehot:
                msg = torch.nn.functional.embedding(self.row, self.weight.view(-1, d_out))
            else:
                # split/unbind, not slicing: the backward of a slice or of weight[r] allocates and zero-fills
                # a gradient of the whole tensor, once per relation.
                parts = torch.split(h.index_select(0, self.pair_src), self.sizes)
                msg = torch.cat([p @ w for p, w in zip(parts, self.weight.unbind(0))])
            return Aggregate.apply(msg)

    return Layer()


def blas_info(torch) -> str:
    cfg = torch.__config__.show()
    m = re.search(r"BLAS_INFO=([^,\s]+)", cfg)
    blas = m.group(1) if m else "unknown"
    lib = next((line.strip(" -") for line in cfg.splitlines()
                if "Math Kernel Library" in line or "OpenBLAS" in line), "")
    return f"{blas} ({lib})" if lib else blas


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph", required=True)
    ap.add_argument("--variant", choices=["rgcn", "fast", "compact"], required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--max-seconds", type=float, default=0,
                    help="stop timing once this many seconds of timed epochs have passed and at least "
                         "--min-epochs were timed (0 = no limit); for variants that take a minute an epoch")
    ap.add_argument("--min-epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--l2", type=float, default=5e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--memory-fraction", type=float, default=0.7,
                    help="cap on private memory, as a fraction of MemAvailable at start (0 = no cap)")
    ap.add_argument("--json")
    a = ap.parse_args()

    # Before torch loads: its OpenMP and MKL pools size themselves from these.
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    os.environ["MKL_NUM_THREADS"] = str(a.threads)
    import torch
    import torch.nn.functional as F
    warnings.filterwarnings("ignore", category=FutureWarning)  # PyG's use of torch.jit on import
    import torch_geometric
    from torch_geometric.nn import FastRGCNConv, RGCNConv

    torch.set_num_threads(a.threads)
    result = {
        "peer": "torch" if a.variant == "compact" else "pyg",
        "variant": {"rgcn": "RGCNConv", "fast": "FastRGCNConv", "compact": "compact"}[a.variant],
        "graph": a.graph, "threads": torch.get_num_threads(), "hidden": a.hidden, "layers": a.layers,
        "epochs": a.epochs, "warmup": a.warmup,
        "torch": torch.__version__, "torch_geometric": torch_geometric.__version__,
        "blas": blas_info(torch), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "pyg_extensions": {k: bool(getattr(torch_geometric.typing, k, False))
                           for k in ("WITH_PYG_LIB", "WITH_SEGMM", "WITH_TORCH_SCATTER", "WITH_TORCH_SPARSE")},
    }
    cap = cap_memory(a.memory_fraction) if a.memory_fraction > 0 else 0
    result["memory_cap_bytes"] = cap

    try:
        g = graphfile.load(a.graph)
        if g.num_classes <= 0 or not g.train.any():
            raise ValueError(f"{a.graph}: no labels or no training nodes (run add_features.py first)")
        torch.manual_seed(a.seed)
        edge_index = torch.from_numpy(np.stack([g.src, g.dst]))
        edge_type = torch.from_numpy(g.etype)
        x = None if g.features is None else torch.from_numpy(g.features)
        in_dim = g.num_nodes if x is None else x.shape[1]
        y = torch.from_numpy(g.labels)
        train_idx = torch.from_numpy(np.flatnonzero(g.train))
        test_idx = torch.from_numpy(np.flatnonzero(g.test))
        dims = [in_dim] + [a.hidden] * (a.layers - 1) + [g.num_classes]
        if a.variant == "compact":
            convs = torch.nn.ModuleList(
                CompactRgcnLayer(torch, g, dims[i], dims[i + 1], onehot=(i == 0 and x is None))
                for i in range(a.layers))
        else:
            conv = RGCNConv if a.variant == "rgcn" else FastRGCNConv
            # Edges are grouped by relation in the file, so is_sorted holds.
            convs = torch.nn.ModuleList(
                conv(dims[i], dims[i + 1], g.num_relations, aggr="mean", root_weight=False, bias=False,
                     is_sorted=True)
                for i in range(a.layers))

        def forward():
            h = x
            for i, c in enumerate(convs):
                h = c(h, edge_index, edge_type)
                if i + 1 < len(convs):
                    h = F.relu(h)
            return h

        groups = [{"params": convs[0].parameters(), "weight_decay": a.l2},
                  {"params": [p for c in convs[1:] for p in c.parameters()], "weight_decay": 0.0}]
        try:  # the fused CPU Adam (torch >= 2.4) is the fastest documented variant
            opt = torch.optim.Adam(groups, lr=a.lr, fused=True)
            result["adam"] = "fused"
        except (RuntimeError, TypeError, ValueError):
            groups[0]["params"] = convs[0].parameters()
            opt = torch.optim.Adam(groups, lr=a.lr)
            result["adam"] = "default"

        result.update(nodes=g.num_nodes, edges=g.num_edges, relations=g.num_relations,
                      classes=g.num_classes, input="onehot" if x is None else "features",
                      params=sum(p.numel() for p in convs.parameters()))
        times, losses = [], []
        for epoch in range(a.warmup + a.epochs):
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            out = forward()
            loss = F.cross_entropy(out[train_idx], y[train_idx])
            loss.backward()
            opt.step()
            dt = time.perf_counter() - t0
            losses.append(float(loss.detach()))
            if epoch >= a.warmup:
                times.append(dt)
                if a.max_seconds > 0 and len(times) >= a.min_epochs and sum(times) >= a.max_seconds:
                    break
        with torch.no_grad():
            pred = forward().argmax(1)
        acc = lambda idx: float((pred[idx] == y[idx]).float().mean()) if idx.numel() else None
        result.update(status="ok", epoch_seconds=times, epochs_timed=len(times),
                      median_ms=1e3 * statistics.median(times), epoch_loss=losses,
                      train_accuracy=acc(train_idx), test_accuracy=acc(test_idx))
    except (RuntimeError, MemoryError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if isinstance(e, MemoryError) or "alloc" in msg.lower() or "memory" in msg.lower():
            result.update(status="oom", error=msg[:300])
        else:
            result.update(status="error", error=msg[:300])
            traceback.print_exc()
    except Exception as e:  # noqa: BLE001 - every failure becomes a row, with the traceback on stderr
        result.update(status="error", error=f"{type(e).__name__}: {e}"[:300])
        traceback.print_exc()
    result["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    text = json.dumps(result)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0 if result["status"] in ("ok", "oom") else 1


if __name__ == "__main__":
    sys.exit(main())
