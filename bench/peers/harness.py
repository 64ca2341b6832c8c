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
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import graphfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, "build")
TESSEL = os.path.join(BUILD, "bin", "tessel")
LIMITS = os.path.join(BUILD, "bin", "tessel-bench-limits")
WORK = os.path.join(BUILD, "bench")          # graph files and run directories
PEERS = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(ROOT, "bench", "jobs", "rgcn-bench.toml")
DATA = os.path.normpath(os.path.join(ROOT, "..", "shared", "data"))
VENV_PY = {"pyg": os.path.join(BUILD, "bench-venv", "bin", "python"),
           "torch": os.path.join(BUILD, "bench-venv", "bin", "python"),
           "dgl": os.path.join(BUILD, "bench-venv-dgl", "bin", "python")}

THREADS = 2
HEADS = 1
WARMUP = 1          # untimed epochs on both sides: Tessel's first epoch_seconds entry is dropped
WAIT_IDLE = 0.0     # --wait-idle: seconds to wait for idle cores before each measurement
COMMIT = "unknown"  # set in main: the checkout measured, recorded in every case row
MODELS = ("rgcn", "rgat", "hgt")
CASES = ("aifb", "fb15k", "synthetic")
SIZES = (32, 64, 128)
LAYER_COUNTS = (1, 2)
SYSTEMS = ("pyg", "dgl", "torch")
# The matrix's target, reported and not asserted: Tessel's epoch <= 1/3 of the best peer's on FB15k-237,
# hidden 64, 2 layers. The acceptance suite keeps the original issue's 0.5.
TARGET = {"case": "fb15k", "size": 64, "layers": 2, "ratio": round(1 / 3, 4)}
ACCEPTANCE_TARGET = 0.5
# The synthetic graph: >= 5 M edges (5,249,874 with seed 1: 2.5 M base, as many inverse, 250 k self-loops).
SYNTHETIC = ["--nodes", "250000", "--node-types", "3", "--relations", "50", "--classes", "8",
             "--avg-degree", "20", "--feature-dim", "0", "--seed", "1", "--name", "synthetic"]

# The scale suite (Tessel only; a peer would need hours or more memory than the machine has): the issue's
# 1M-node graph, `tessel generate graph --nodes 1000000 --avg-degree 20 --relations 50 --feature-dim 64`
# (103 relations with inverses and self-loops, 20,999,964 edges), hidden 64, 2 layers, 1 worker, 2 threads,
# and the peak memory each model may use per edge.
SCALE = ["--nodes", "1000000", "--avg-degree", "20", "--relations", "50", "--feature-dim", "64", "--seed", "1",
         "--name", "scale"]
SCALE_BYTES_PER_EDGE = {"rgcn": 150, "rgat": 300, "hgt": 300}
SCALE_EPOCHS = 3  # timed, after the warm-up (2 with --quick): each is seconds to a minute

# (system, model, layer class, name, metric prefix, baseline candidate). `system` picks the venv and the
# --peers selection; "torch" is the compact RGCN reference: reported, never the baseline.
PEER_VARIANTS = (
    ("pyg", "rgcn", "RGCNConv", "pyg-RGCNConv", "pyg_RGCNConv", True),
    ("pyg", "rgcn", "FastRGCNConv", "pyg-FastRGCNConv", "pyg_FastRGCNConv", True),
    ("dgl", "rgcn", "RelGraphConv", "dgl-RelGraphConv", "dgl_RelGraphConv", True),
    ("torch", "rgcn", "compact", "torch-compact", "torch_compact", False),
    ("pyg", "rgat", "RGATConv", "pyg-RGATConv", "pyg_RGATConv", True),
    ("dgl", "rgat", "GATConv", "dgl-HeteroGraphConv-GATConv", "dgl_GATConv", True),
    ("pyg", "hgt", "HGTConv", "pyg-HGTConv", "pyg_HGTConv", True),
    ("dgl", "hgt", "HGTConv", "dgl-HGTConv", "dgl_HGTConv", True),
)
ABLATIONS = (("compact", "nocompact"), ("reorder", "noreorder"))  # model.KEY=false, metric infix


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def rel(path: str) -> str:
    return os.path.relpath(path, ROOT)


def loadavg() -> float:
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError):
        return -1.0


def cpu_busy(seconds: float = 1.0) -> float:
    """Fraction of all cores busy over the next `seconds` (from /proc/stat), while this process sleeps."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]  # total, idle + iowait
    try:
        t0, i0 = sample()
        time.sleep(seconds)
        t1, i1 = sample()
        return 1.0 - (i1 - i0) / max(1, t1 - t0)
    except (OSError, ValueError, IndexError):
        return 0.0


def wait_idle(limit_seconds: float) -> float:
    """With --wait-idle S: waits up to S seconds for the cores to be nearly idle (< 10% busy over 2 s), so
    that a measurement does not share them with other work. Returns the busy fraction it last saw."""
    busy = cpu_busy(0.5)
    deadline = time.monotonic() + limit_seconds
    while busy > 0.10 and time.monotonic() < deadline:
        busy = cpu_busy(2.0)
    if limit_seconds > 0 and busy > 0.10:
        log(f"warning: cores still {100 * busy:.0f}% busy after waiting {limit_seconds:.0f} s; measuring anyway")
    return busy


def run_measured(cmd: list, timeout: float, env=None) -> tuple:
    """Runs cmd from the repository root; returns (exit code, stdout, stderr, peak RSS in bytes).
    The peak RSS is the child's own, from wait4's rusage. A child still running after `timeout` seconds
    is killed and reported as exit code 124."""
    timed_out = threading.Event()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, text=True)

        def kill() -> None:
            timed_out.set()
            p.kill()

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here, so Popen must not wait again
        out.seek(0)
        err.seek(0)
        out_text, err_text = out.read(), err.read()
    if timed_out.is_set():
        return 124, out_text, err_text + f"\n(killed after {timeout:.0f} s)", usage.ru_maxrss * 1024
    return p.returncode, out_text, err_text, usage.ru_maxrss * 1024


def show(cmd: list) -> str:
    return " ".join(rel(c) if c.startswith(ROOT) else c for c in cmd)


# ---- graph files ------------------------------------------------------------------------------------

def newer(path: str, *sources: str) -> bool:
    """True when path exists and is at least as new as every existing source."""
    if not os.path.exists(path):
        return False
    t = os.path.getmtime(path)
    return all(t >= os.path.getmtime(s) for s in sources if os.path.exists(s))


def tessel_make(what: list, out: str, errors: list) -> bool:
    """`tessel import ...` or `tessel generate graph ...` into `out`, unless `out` is newer than the binary."""
    if newer(out, TESSEL):
        return True
    if not os.path.exists(TESSEL):
        if os.path.exists(out):
            log(f"warning: {TESSEL} is missing; using the existing {rel(out)} as it is")
            return True
        errors.append(f"{rel(out)}: cannot make it, {rel(TESSEL)} is missing")
        return False
    log(f"writing {rel(out)} with tessel {' '.join(what[:2])}")
    code, out_text, err, _ = run_measured([TESSEL] + what + ["--out", out], 1800)
    if code != 0:
        errors.append(f"tessel {' '.join(what[:2])} exited {code}: {(err or out_text).strip()[-400:]}")
        return False
    return True


def add_features(src: str, out: str, args: list, errors: list) -> bool:
    script = os.path.join(PEERS, "add_features.py")
    if newer(out, src, script):
        return True
    log(f"writing {rel(out)} (add_features.py {' '.join(args)})")
    code, _, err, _ = run_measured([sys.executable, script, src, out] + args, 900)
    if code != 0:
        errors.append(f"add_features.py {rel(out)} exited {code}: {err.strip()[-400:]}")
        return False
    return True


def prepare_graphs(cases: list, sizes: list, acceptance: bool, errors: list) -> dict:
    """Makes (or reuses) the graph files, re-made when the tessel binary (or add_features.py) is newer:
      aifb.h5        tessel import rdf (one-hot: the acceptance case);
      fb15k.h5       tessel import edges --add-inverse --add-self-loop;
      fb15k-feat.h5  + add_features.py: 64 random features, 16 random classes, 10% train / 10% test;
      synthetic.h5   tessel generate graph (SYNTHETIC), labels from the generator, no features;
      scale.h5       tessel generate graph (SCALE): the scale suite's 1M-node graph, with its own features;
      CASE-fSIZE.h5  the matrix's inputs: the case's file with random features of width SIZE and its
                     labels kept (add_features.py --keep-labels); fb15k-f64.h5 is fb15k-feat.h5 itself.
    Returns {(case, size): path} for the matrix, size None for the acceptance files."""
    os.makedirs(WORK, exist_ok=True)
    graphs = {}
    base = {}
    if "aifb" in cases:
        aifb = os.path.join(WORK, "aifb.h5")
        if tessel_make(["import", "rdf", "--triples", os.path.join(DATA, "aifb", "aifb_stripped.nt.gz"),
                        "--train-labels", os.path.join(DATA, "aifb", "trainingSet.tsv"),
                        "--test-labels", os.path.join(DATA, "aifb", "testSet.tsv")], aifb, errors):
            base["aifb"] = aifb
            if acceptance:
                graphs[("aifb", None)] = aifb
    if "fb15k" in cases:
        fb = os.path.join(WORK, "fb15k.h5")
        fb_feat = os.path.join(WORK, "fb15k-feat.h5")
        if tessel_make(["import", "edges", "--input", os.path.join(DATA, "fb15k-237", "FB15k-237.tar.gz"),
                        "--add-inverse", "--add-self-loop"], fb, errors) and \
                add_features(fb, fb_feat, ["--dim", "64", "--classes", "16", "--train", "0.1", "--test", "0.1",
                                           "--seed", "0"], errors):
            base["fb15k"] = fb_feat
            if acceptance:
                graphs[("fb15k", None)] = fb_feat
    if "synthetic" in cases:
        syn = os.path.join(WORK, "synthetic.h5")
        if tessel_make(["generate", "graph"] + SYNTHETIC, syn, errors):
            base["synthetic"] = syn
    if "scale" in cases:
        scale = os.path.join(WORK, "scale.h5")
        if tessel_make(["generate", "graph"] + SCALE, scale, errors):
            graphs[("scale", 64)] = scale
    for case, src in base.items():
        for size in sizes:
            if case == "fb15k" and size == 64:
                graphs[(case, size)] = src
                continue
            out = os.path.join(WORK, f"{case}-f{size}.h5")
            if add_features(src, out, ["--keep-labels", "--dim", str(size), "--seed", "0"], errors):
                graphs[(case, size)] = out
    return graphs


def fingerprint(path: str) -> str:
    import h5py
    with h5py.File(path, "r") as f:
        v = f["meta"].attrs.get("source_fingerprint", b"")
    v = v.decode() if isinstance(v, bytes) else str(v)
    # "tessel-import-rdf v1; triples=...; ...;add_features(...)" -> "tessel-import-rdf v1 + add_features(...)"
    parts = [p.strip() for p in v.split(";")]
    return " + ".join([parts[0]] + [p for p in parts[1:] if p.startswith("add_features")])


def git_commit() -> str:
    """The checkout's commit, with "+dirty" when the working tree has changes (read-only git calls)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=30).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=30).stdout.strip()
        return head + ("+dirty" if dirty else "") if head else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


# ---- limits and the cost model ----------------------------------------------------------------------

def cpu_has_avx512() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx512f" in line for line in f)
    except OSError:
        return False


def measure_limits(quick: bool, errors: list) -> dict:
    """Runs tessel-bench-limits at THREADS threads. On an AVX-512 machine whose OpenBLAS picks an AVX2
    kernel (0.3.21 does on this Zen 5), it runs once more with OPENBLAS_CORETYPE=SkylakeX: the GEMM limit is
    the better of the two, since it is what the machine can do."""
    if not os.path.exists(LIMITS):
        errors.append(f"{rel(LIMITS)} is missing: fraction_of_limit is not reported")
        return {}
    args = [LIMITS, "--threads", str(THREADS)] + (["--quick"] if quick else [])
    wait_idle(WAIT_IDLE)
    code, out, err, _ = run_measured(args, 600)
    if code != 0:
        errors.append(f"tessel-bench-limits exited {code}: {err.strip()[-300:]}")
        return {}
    lim = json.loads(out)
    lim["sgemm_default"] = lim["sgemm"]
    core = lim["sgemm"]["blas"]
    if cpu_has_avx512() and not any(k in core for k in ("SkylakeX", "Cooperlake", "SapphireRapids")):
        env = dict(os.environ, OPENBLAS_CORETYPE="SkylakeX")
        wait_idle(WAIT_IDLE)
        code, out2, err, _ = run_measured(args, 600, env=env)
        if code == 0:
            second = json.loads(out2)
            lim["sgemm_avx512"] = second["sgemm"]
            if lim["sgemm_avx512"]["gflops"] > lim["sgemm"]["gflops"]:
                lim["sgemm"] = lim["sgemm_avx512"]
            # The copy does not depend on the core type: a second sample of a limit that varies with the
            # host's load (40 to 70 GB/s seen on this VM); keep the better, and the same for every level.
            for key in ("stream_copy", "stream_update"):
                if key in second and second[key]["gbps"] > lim.get(key, {}).get("gbps", 0):
                    lim[key] = second[key]
            better = {lv["name"]: lv for lv in second.get("levels", [])}
            lim["levels"] = [max(lv, better.get(lv["name"], lv), key=lambda x: x["gbps"])
                             for lv in lim.get("levels", [])]
    lim["levels"] = memory_levels(lim)
    lim["memory"] = dict(lim["levels"][-1], kind=lim["levels"][-1]["source"])
    return lim


def memory_levels(lim: dict) -> list:
    """The levels the floor charges, innermost first, each {name, capacity_bytes (0: DRAM), gbps, source}:
    tessel-bench-limits' cache levels and DRAM, DRAM's limit the better of its own kernels and the stream
    copy and update (which a second sample may have raised). An older binary without levels: DRAM alone,
    the better of the copy and the update."""
    streams = [(lim[k]["gbps"], k) for k in ("stream_copy", "stream_update") if k in lim]
    levels = [dict(lv) for lv in lim.get("levels", [])]
    if not levels or levels[-1].get("capacity_bytes"):
        levels.append({"name": "DRAM", "capacity_bytes": 0, "gbps": 0, "source": "none"})
    dram = levels[-1]
    for gbps, kind in streams:
        if gbps > dram["gbps"]:
            dram.update(gbps=gbps, source=kind)
    return levels


def level_traffic(components: list, levels: list) -> list:
    """The bytes each memory level must carry in one epoch, innermost first (bench/README.md "A floor that
    is a floor"). components: (name, bytes, working set bytes, reuse), reuse "stream" (every byte of the
    working set moved bytes / working set times, as Adam moves its parameters and moments) or "gather" (the
    same rows read again and again, as the edges read their source rows).
    - The innermost level carries every byte: every load and store of the core goes through it.
    - A level further out carries only what the levels inside it cannot hold, together (`inside` bytes):
      of a streamed working set W, at least W - inside bytes are not inside when the pass starts and must
      come in, and as many leave, each time it is moved; of a gathered one, at least the W - inside bytes
      that are not inside must come in once (reuse is served from inside, however the rows are ordered).
    Capacities are the whole levels', summed, as if exclusive: generous to the hardware, so a floor."""
    out = []
    inside = 0
    for i, lv in enumerate(levels):
        total = 0
        for _, traffic, ws, reuse in components:
            if i == 0:
                total += traffic
            elif ws > inside:
                total += (ws - inside) * (traffic / ws if reuse == "stream" else 1)
        out.append(int(total))
        inside += lv.get("capacity_bytes") or 0
    return out


def lower_bound(model: str, stats: dict, hidden: int, layers: int, lim: dict) -> dict:
    """A floor on one epoch's time of MODELS.md's model (bench/README.md "fraction_of_limit"): GEMM flops at
    the sgemm limit vs compulsory memory traffic at each memory level's limit, whichever is larger.
    Flops, counting only the dense products: every per-relation product applied once per unique (relation,
    node) pair, on whichever side has fewer (Hector's compact materialization; with linear-operator
    reordering RGAT's attention logits and HGT's rel_att / rel_msg can move to either side): RGCN's and
    RGAT's W_r, HGT's rel_att and rel_msg; HGT's per-node-type k, q, v and out once per node, and its
    classifier. Forward F, backward 2F (weight and input gradients), except layer 1's input gradient, which
    nobody needs; a one-hot layer 1 is a row gather (no flops).
    Traffic, the bytes no kernel can avoid moving:
    - Adam reads and writes every parameter and both moments once (24 bytes a parameter; the gradient is
      assumed fused); its working set is the 12 bytes a parameter it updates;
    - every layer reads each edge's source row at least once in the forward pass and once in the backward
      pass (4 bytes a value): the layer's input row (for a one-hot layer, the row of W_r it selects, as
      wide as the output), and for HGT the source's k and v rows. Its working set is the rows read: one per
      source node (per unique (relation, source) pair for a one-hot layer). The edge index arrays and the
      destination side are left out, so this stays a floor.
    Each memory level carries the share of that traffic the levels inside it cannot hold (level_traffic),
    at its own limit measured in the same run; the memory time is the slowest level's."""
    onehot = stats["feature_dim"] == 0
    n, R, T, C = stats["nodes"], stats["relations"], stats.get("node_types", 1), stats["classes"]
    E = stats["edges"]
    sources = stats.get("source_nodes", n)
    ps, pd = stats["unique_rel_src_pairs"], stats["unique_rel_dst_pairs"]
    flops = 0
    params = 0
    edges = []  # per layer: (values read by the source-row gathers per epoch, values in the rows read)
    if model == "hgt":
        dims = [stats["feature_dim"]] + [hidden] * layers
        d = hidden // HEADS
        for layer in range(layers):
            k, D = dims[layer], dims[layer + 1]
            params += 3 * T * k * D + T * D * D + T + 2 * R * HEADS * d * d + R * HEADS
            kqv = 2 * n * 3 * k * D
            rest = 2 * n * D * D + 2 * 2 * min(ps, pd) * HEADS * d * d
            flops += kqv * (2 if layer == 0 else 3) + rest * 3
            edges.append((2 * E * 2 * D, sources * 2 * D))  # k and v rows, forward and backward
        params += hidden * C
        flops += 2 * n * hidden * C * 3
    else:
        dims = [n if onehot else stats["feature_dim"]] + [hidden] * (layers - 1) + [C]
        pairs = min(ps, pd)
        for layer in range(layers):
            d_in, d_out = dims[layer], dims[layer + 1]
            params += R * d_in * d_out + (2 * R * d_out if model == "rgat" else 0)
            one_hot_layer = layer == 0 and onehot
            if one_hot_layer:
                edges.append((2 * E * d_out, ps * d_out))
                continue
            edges.append((2 * E * d_in, sources * d_in))
            flops += 2 * pairs * d_in * d_out * (2 if layer == 0 else 3)
    adam_bytes = 24 * params
    edge_bytes = 4 * sum(v for v, _ in edges)
    components = [("adam", adam_bytes, 12 * params, "stream")] + [
        (f"edges.layer{i}", 4 * v, 4 * rows, "gather") for i, (v, rows) in enumerate(edges)]
    out = {"flops": flops, "bytes": adam_bytes + edge_bytes, "adam_bytes": adam_bytes, "edge_bytes": edge_bytes,
           "params": params, "working_set_bytes": {name: ws for name, _, ws, _ in components}}
    if lim:
        levels = lim["levels"]
        t_gemm = flops / (lim["sgemm"]["gflops"] * 1e9)
        traffic = level_traffic(components, levels)
        times = [b / (lv["gbps"] * 1e9) for b, lv in zip(traffic, levels)]
        slowest = max(range(len(levels)), key=lambda i: times[i])
        out.update(seconds=max(t_gemm, times[slowest]), bound="gemm" if t_gemm >= times[slowest] else "memory",
                   bound_level=levels[slowest]["name"], level_bytes={lv["name"]: b for lv, b in zip(levels, traffic)},
                   level_ms={lv["name"]: round(1e3 * t, 3) for lv, t in zip(levels, times)})
    return out


# ---- the two sides ----------------------------------------------------------------------------------

class Budget:
    """Per-run caps, so that the full family (about 200 processes) ends in well under 2 hours on 2 cores.
    A peer's timed epochs stop after `peer_epoch_s` seconds once 3 have run; the whole peer process (import,
    load, setup, warm-up, epochs) has `peer_deadline_s` (--peer-deadline), after which it stops (status
    "timeout" when it timed no epoch) and it is killed `grace_s` later if it does not stop by itself (a
    long library call can hold off the deadline's signal). The acceptance suite keeps its original budget.
    Tessel runs its epochs in full, within `tessel_s`. Past `family_s` (--budget-minutes) from the start, no
    further peer run starts: the matrix runs its most important points first (2 layers, size 64)."""
    def __init__(self, quick: bool, epochs: int | None, peer_deadline: float | None, minutes: float | None):
        self.epochs = epochs if epochs else (5 if quick else 20)
        # Once the family has run this long, the peer runs not yet started are not started (Tessel's are).
        self.family_s = 60 * (minutes if minutes else (30 if quick else 70))
        self.peer_epoch_s = 5 if quick else 10
        self.peer_deadline_s = peer_deadline if peer_deadline else (40 if quick else 60)
        self.acceptance_epoch_s = 60 if quick else 300
        self.acceptance_deadline_s = 180 if quick else 600
        self.tessel_s = 300 if quick else 900
        self.grace_s = 30


def tessel_summary_times(summary: dict, key: str):
    v = summary.get(key)
    if not isinstance(v, list) or len(v) <= WARMUP:
        return None
    return v[WARMUP:]


def run_tessel(tag: str, graph: str, model: str, layers: int, hidden: int, budget: Budget,
               extra: list = (), epochs: int | None = None) -> dict:
    run_dir = os.path.join(WORK, f"run-{tag}")
    shutil.rmtree(run_dir, ignore_errors=True)
    if not os.path.exists(TESSEL):
        return {"status": "error", "error": f"{rel(TESSEL)} is missing"}
    cmd = [TESSEL, "run", JOB, "--set", f"data.graph={rel(graph)}", "--set", f"job.output_dir={rel(run_dir)}",
           "--set", f"train.epochs={WARMUP + (epochs or budget.epochs)}", "--set", f"model.name={model}",
           "--set", f"model.layers={layers}", "--set", f"model.hidden={hidden}"]
    if model != "rgcn":  # a key today's RGCN-only build does not know: only where it matters
        cmd += ["--set", f"model.heads={HEADS}"]
    for kv in extra:
        cmd += ["--set", kv]
    busy = wait_idle(WAIT_IDLE)
    load = loadavg()
    log(f"tessel: {tag} ({show(cmd)})")
    code, out, err, rss = run_measured(cmd, budget.tessel_s)
    res = {"status": "ok", "load_avg": load, "busy_before": round(busy, 3), "command": show(cmd)}
    summary_path = os.path.join(run_dir, "summary.json")
    if code == 124:
        return {**res, "status": "timeout", "error": f"tessel run killed after {budget.tessel_s} s",
                "peak_rss_bytes": rss}
    if code != 0 or not os.path.exists(summary_path):
        return {**res, "status": "error", "error": f"tessel run exited {code}: {(err or out).strip()[-400:]}"}
    with open(summary_path) as f:
        summary = json.load(f)
    timed = tessel_summary_times(summary, "epoch_seconds")
    if timed is None:
        return {**res, "status": "error",
                "error": f"{rel(summary_path)}: epoch_seconds has {len(summary.get('epoch_seconds') or [])} entries"}
    fwd = tessel_summary_times(summary, "epoch_forward_seconds")
    bwd = tessel_summary_times(summary, "epoch_backward_seconds")
    res.update(epoch_seconds=timed, epochs_timed=len(timed), median_ms=1e3 * statistics.median(timed),
               min_ms=1e3 * min(timed),
               peak_rss_bytes=max(rss, int(summary.get("peak_worker_rss_bytes") or 0)),
               train_accuracy=summary.get("train_accuracy"), test_accuracy=summary.get("test_accuracy"),
               version=summary.get("version"))
    if fwd is not None and bwd is not None:
        res.update(forward_seconds=fwd, backward_seconds=bwd, forward_median_ms=1e3 * statistics.median(fwd),
                   backward_median_ms=1e3 * statistics.median(bwd))
    else:
        res["phase_error"] = "summary.json has no epoch_forward_seconds / epoch_backward_seconds"
    return res


def run_peer(tag: str, graph: str, system: str, model: str, variant: str, layers: int, hidden: int,
             epoch_s: float, deadline_s: float, budget: Budget) -> dict:
    out_json = os.path.join(WORK, f"peer-{tag}-{system}-{variant}.json")
    if os.path.exists(out_json):
        os.unlink(out_json)
    py = VENV_PY[system]
    if not os.path.exists(py):
        setup = "--dgl" if system == "dgl" else "--peers"
        return {"status": "error", "error": f"{rel(py)} is missing: run bench/peers/setup.sh {setup}"}
    cmd = [py, os.path.join(PEERS, "rgnn_peer.py"), "--graph", graph, "--system", system, "--model", model,
           "--variant", variant, "--threads", str(THREADS), "--hidden", str(hidden), "--layers", str(layers),
           "--heads", str(HEADS), "--epochs", str(budget.epochs), "--warmup", str(WARMUP),
           "--max-seconds", str(epoch_s), "--deadline", str(deadline_s), "--json", out_json]
    busy = wait_idle(WAIT_IDLE)
    load = loadavg()
    log(f"peer: {tag} {system}-{variant} ({show(cmd)})")
    code, out, err, rss = run_measured(cmd, deadline_s + budget.grace_s)
    try:
        with open(out_json) as f:
            res = json.load(f)
    except (OSError, ValueError):
        if code == 124:
            res = {"status": "timeout", "error": f"killed after {deadline_s + budget.grace_s:.0f} s",
                   "peak_rss_bytes": rss}
        elif code < 0 or code == 137:
            res = {"status": "oom" if code in (-9, 137) else "error",
                   "error": f"rgnn_peer.py killed by signal {-code if code < 0 else 9} (the kernel's OOM killer?): "
                            f"{err.strip()[-300:]}", "peak_rss_bytes": rss}
        else:
            res = {"status": "error", "error": f"rgnn_peer.py exited {code}: {err.strip()[-400:]}"}
    res.update(load_avg=load, busy_before=round(busy, 3), command=show(cmd))
    return res


# ---- rows ----------------------------------------------------------------------------------------------

def r3(v):
    return None if v is None else round(v, 3)


def fraction(bound: dict, ms) -> float | None:
    if ms is None or "seconds" not in bound:
        return None
    return round(bound["seconds"] / (ms / 1e3), 4)


def bound_keys(bound: dict) -> dict:
    """The lower_bound_ms row's account of the floor."""
    keys = ("bound", "bound_level", "flops", "bytes", "adam_bytes", "edge_bytes", "params", "working_set_bytes",
            "level_bytes", "level_ms")
    return {k: bound.get(k) for k in keys}


def mib(b):
    return r3(b / 2**20) if b else None


def system_rows(common: dict, prefix: str, system: str, res: dict, bound: dict, extra: dict) -> list:
    """The forward, backward, epoch and peak-RSS rows of one system at one point."""
    status = res.get("status")
    epoch = {**common, "metric": f"{prefix}_epoch_ms", "phase": "epoch", "system": system,
             "value": r3(res.get("median_ms")), "unit": "ms", "fraction_of_limit": fraction(bound, res.get("median_ms")),
             "status": status, "error": res.get("error"), "epochs_timed": res.get("epochs_timed"),
             "epoch_ms": [r3(1e3 * t) for t in res.get("epoch_seconds", [])],
             "min_ms": r3(1e3 * min(res["epoch_seconds"])) if res.get("epoch_seconds") else None,
             "busy_before": res.get("busy_before"), "load_avg": res.get("load_avg"),
             "test_accuracy": res.get("test_accuracy"), **extra}
    if status == "ok" and res.get("cut_by"):
        epoch["cut_by"] = res["cut_by"]
    rows = []
    for phase, key in (("forward", "forward_median_ms"), ("backward", "backward_median_ms")):
        row = {**common, "metric": f"{prefix}_{phase}_ms", "phase": phase, "system": system,
               "value": r3(res.get(key)), "unit": "ms", "status": status, "error": res.get("error")}
        if status == "ok" and res.get(key) is None:
            row.update(status="missing", error=res.get("phase_error") or "no per-phase times")
        rows.append(row)
    rows.append(epoch)
    rows.append({**common, "metric": f"{prefix}_peak_rss", "phase": "epoch", "system": system,
                 "value": mib(res.get("peak_rss_bytes")), "unit": "MiB", "status": status})
    return rows


def peer_extra(p: dict) -> dict:
    keys = ("torch", "torch_geometric", "dgl", "dgl_threads", "blas", "cpu_capability", "adam", "pyg_extensions",
            "params", "setup_seconds", "memory_cap_bytes")
    return {k: p[k] for k in keys if k in p}


def compare(tessel_rows: list, peers: list, target: float | None) -> None:
    """Adds baseline / ratio to Tessel's epoch and peak-RSS rows. peers: (name, candidate, result)."""
    ok = [(name, cand, p) for name, cand, p in peers if p.get("status") == "ok" and p.get("median_ms")]
    best = min(((p["median_ms"], name, p) for name, cand, p in ok if cand), default=None, key=lambda t: t[0])
    ref = next(((p["median_ms"], name) for name, cand, p in ok if not cand), None)
    epoch = next(r for r in tessel_rows if r["metric"].endswith("_epoch_ms"))
    rss = next(r for r in tessel_rows if r["metric"].endswith("_peak_rss"))
    t_ms = epoch["value"]
    if best is not None:
        epoch.update(baseline=r3(best[0]), baseline_system=best[1],
                     ratio=round(t_ms / best[0], 4) if t_ms is not None else None)
        if target is not None:
            epoch.update(target_ratio=target, meets_target=(t_ms / best[0] <= target) if t_ms is not None else None)
        b_rss = mib(best[2].get("peak_rss_bytes"))
        rss.update(baseline=b_rss, baseline_system=best[1],
                   ratio=round(rss["value"] / b_rss, 4) if rss["value"] and b_rss else None,
                   lower_than_baseline=(rss["value"] < b_rss) if rss["value"] and b_rss else None)
    peer_rss = [mib(p.get("peak_rss_bytes")) for _, cand, p in ok if cand and p.get("peak_rss_bytes")]
    if peer_rss and rss["value"]:
        rss["lower_than_every_peer"] = all(rss["value"] < v for v in peer_rss)
    if ref is not None:
        epoch.update(reference=r3(ref[0]), reference_system=ref[1],
                     reference_ratio=round(t_ms / ref[0], 4) if t_ms is not None else None)


def point_rows(bench: str, suite: str, model: str, case: str, layers: int, size: int, graph: str, stats: dict,
               bound: dict, tessel: dict, peers: list, target: float | None) -> list:
    """peers: (variant tuple, result)."""
    common = {"bench": bench, "suite": suite, "model": model, "case": case, "layers": layers, "size": size,
              "hidden": size, "heads": HEADS, "input": "onehot" if stats["feature_dim"] == 0 else "features",
              "graph": rel(graph), "graph_source": fingerprint(graph), "threads": THREADS, "commit": COMMIT}
    rows = [{**common, "metric": "lower_bound_ms", "phase": "epoch",
             "value": r3(1e3 * bound["seconds"]) if "seconds" in bound else None, "unit": "ms",
             **bound_keys(bound), "graph_stats": stats}]
    for (system, _, variant, name, prefix, candidate), p in peers:
        rows += system_rows(common, prefix, name, p, bound, {"baseline_candidate": candidate, **peer_extra(p)})
    t_rows = system_rows(common, "tessel", "tessel", tessel, bound, {"version": tessel.get("version")})
    compare(t_rows, [(v[3], v[5], p) for v, p in peers], target)
    return rows + t_rows


def ablation_rows(bench: str, model: str, case: str, graph: str, stats: dict, bound: dict, default: dict,
                  variants: dict) -> list:
    common = {"bench": bench, "suite": "ablation", "model": model, "case": case, "layers": 2, "size": 64,
              "hidden": 64, "heads": HEADS, "input": "features", "graph": rel(graph),
              "graph_source": fingerprint(graph), "threads": THREADS, "commit": COMMIT}
    rows = []
    for (key, infix), res in ((a, variants[a[0]]) for a in ABLATIONS if a[0] in variants):
        r = system_rows({**common, "setting": f"model.{key}=false"}, f"tessel_{infix}", f"tessel-{infix}", res,
                        bound, {"version": res.get("version")})
        for row in r:
            base_key = {"forward": "forward_median_ms", "backward": "backward_median_ms", "epoch": "median_ms"}
            if row["metric"].endswith("_peak_rss"):
                b = mib(default.get("peak_rss_bytes"))
            else:
                b = r3(default.get(base_key[row["phase"]]))
            row.update(baseline=b, baseline_system="tessel (default: compact and reorder on)",
                       ratio=round(row["value"] / b, 4) if row["value"] and b else None)
            if row["metric"].endswith("_peak_rss"):
                row["default_lower"] = (b < row["value"]) if row["value"] and b else None
        rows += r
    return rows


# ---- tables ---------------------------------------------------------------------------------------------

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


def scale_rows(bench: str, model: str, graph: str, stats: dict, bound: dict, res: dict) -> list:
    """The scale suite's rows: Tessel's epoch (with fraction_of_limit) and its peak memory per edge."""
    common = {"bench": bench, "suite": "scale", "model": model, "case": "scale", "layers": 2, "size": 64,
              "hidden": 64, "heads": HEADS, "input": "features", "graph": rel(graph),
              "graph_source": fingerprint(graph), "threads": THREADS, "commit": COMMIT, "edges": stats["edges"]}
    ok = res.get("status") == "ok"
    status = {"status": res.get("status"), **({"error": res["error"]} if res.get("error") else {})}
    rows = [{**common, "metric": "lower_bound_ms", "phase": "epoch",
             "value": r3(1e3 * bound["seconds"]) if "seconds" in bound else None, "unit": "ms",
             **bound_keys(bound), "graph_stats": stats}]
    rows.append({**common, "metric": "tessel_epoch_ms", "phase": "epoch", "unit": "ms", **status,
                 "value": r3(res.get("median_ms")) if ok else None, "min_ms": r3(res.get("min_ms")) if ok else None,
                 "epoch_ms": [r3(1e3 * t) for t in res.get("epoch_seconds") or []],
                 "epochs_timed": res.get("epochs_timed"),
                 "fraction_of_limit": fraction(bound, res.get("median_ms")) if ok else None,
                 "forward_ms": r3(res.get("forward_median_ms")), "backward_ms": r3(res.get("backward_median_ms")),
                 "test_accuracy": res.get("test_accuracy"), "load_avg": res.get("load_avg"),
                 "busy_before": res.get("busy_before")})
    peak = res.get("peak_rss_bytes")
    per_edge = peak / stats["edges"] if peak else None
    limit = SCALE_BYTES_PER_EDGE[model]
    rows.append({**common, "metric": "tessel_peak_bytes_per_edge", "phase": "epoch", "unit": "B/edge", **status,
                 "value": round(per_edge, 1) if per_edge else None, "peak_rss_bytes": peak,
                 "target_bytes_per_edge": limit,
                 "meets_target": per_edge <= limit if per_edge else None})
    return rows


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


def limit_rows(bench: str, lim: dict) -> list:
    if not lim:
        return []
    rows = [{"bench": bench, "case": "machine", "metric": "sgemm_gflops", "value": lim["sgemm_default"]["gflops"],
             "unit": "GFLOP/s", "threads": THREADS, "n": lim["sgemm_default"]["n"],
             "blas": lim["sgemm_default"]["blas"], "note": "OpenBLAS as Tessel loads it"}]
    if "sgemm_avx512" in lim:
        rows.append({"bench": bench, "case": "machine", "metric": "sgemm_gflops_avx512",
                     "value": lim["sgemm_avx512"]["gflops"], "unit": "GFLOP/s", "threads": THREADS,
                     "n": lim["sgemm_avx512"]["n"], "blas": lim["sgemm_avx512"]["blas"],
                     "note": "OPENBLAS_CORETYPE=SkylakeX"})
    rows.append({"bench": bench, "case": "machine", "metric": "stream_copy_gbps",
                 "value": lim["stream_copy"]["gbps"], "unit": "GB/s", "threads": THREADS,
                 "median_gbps": lim["stream_copy"].get("median_gbps"), "note": "bytes read + bytes written"})
    if "stream_update" in lim:
        rows.append({"bench": bench, "case": "machine", "metric": "stream_update_gbps",
                     "value": lim["stream_update"]["gbps"], "unit": "GB/s", "threads": THREADS,
                     "median_gbps": lim["stream_update"].get("median_gbps"),
                     "note": "in place, bytes read + bytes written"})
    for lv in lim["levels"]:
        row = {"bench": bench, "case": "machine", "metric": f"{lv['name']}_gbps", "value": lv["gbps"], "unit": "GB/s",
               "threads": THREADS, "source": lv["source"], "capacity_bytes": lv.get("capacity_bytes") or None,
               "buffer_bytes": lv.get("buffer_bytes"),
               "note": "the level's limit: its fastest kernel over a buffer that fits in it, bytes read + written"}
        for kernel in ("read", "copy", "update"):
            if kernel in lv:
                row[f"{kernel}_gbps"] = lv[kernel]["gbps"]
                row[f"{kernel}_median_gbps"] = lv[kernel]["median_gbps"]
        rows.append(row)
    rows.append({"bench": bench, "case": "machine", "metric": "memory_gbps", "value": lim["memory"]["gbps"],
                 "unit": "GB/s", "threads": THREADS, "source": lim["memory"]["kind"],
                 "note": "DRAM's limit: the better of its read, copy and update and the stream copy and update"})
    return rows


# ---- main -------------------------------------------------------------------------------------------------

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
    global WAIT_IDLE, COMMIT
    WAIT_IDLE = a.wait_idle
    COMMIT = git_commit()
    budget = Budget(a.quick, a.epochs, a.peer_deadline, a.budget_minutes)
    json_path = os.path.abspath(a.json or os.path.join(WORK, "results", f"{a.family}.json"))
    errors = []
    with_peers = a.family == "peers-rgnn"
    t_start = time.monotonic()

    busy = cpu_busy(1.0)
    if busy > 0.10:
        log(f"warning: the cores are {100 * busy:.0f}% busy before starting: other work shares them, so the "
            f"times below may be inflated (--wait-idle S waits for them before each measurement)")
    at_64_2 = 64 in a.sizes and 2 in a.layers
    acceptance = "rgcn" in a.models and at_64_2
    graphs = prepare_graphs(a.cases, a.sizes, acceptance, errors)
    lim = measure_limits(a.quick, errors)
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
            rows += point_rows(a.family, "acceptance", "rgcn", case, 2, 64, graph, stats, bound, tessel, peers,
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
                rows += point_rows(a.family, "matrix", model, case, layers, size, graph, stats, bound, tessel,
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
                rows += ablation_rows(a.family, model, case, graph, stats, bound, default, variants)

    # The scale suite: Tessel alone on the 1M-node graph, peak memory per edge against its limit.
    if "scale" in a.cases and graphs.get(("scale", 64)) is not None:
        graph = graphs[("scale", 64)]
        stats = stats_of("scale", graph)
        for model in a.models:
            if stats is None:
                break
            bound = lower_bound(model, stats, 64, 2, lim)
            res = tessel_at(model, "scale", 2, 64, graph, epochs=2 if a.quick else SCALE_EPOCHS)
            rows += scale_rows(a.family, model, graph, stats, bound, res)

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
