"""GPT on the GPU, as issue 17's GPU lines measure it: one prepared run for a lent GPU machine, which has
15 minutes of device time a session, start-up included. scripts/device-check.sh --bundle runs it after its
own checks; on a machine without a GPU, --device cpu --small runs every section at toy sizes, which checks
the plumbing, not the GPU: only the loss comparisons are judged there (CTest gpu_check_plumbing).

  python3 bench/gpu/gpt_check.py --out DIR [--sections LIST] [--budget SECONDS] [--device cuda|cpu] [--small]

Sections (--sections, default all; they run in the order diagnose, repeat, speed, rok, sampled, sanitize, the most
needed first; each run ends at its own time limit, and a run that would start with less than a minute of
--budget left is a row SKIP):
  diagnose  the crash and hangs of the first GPU session (issue 17, "Why": a segmentation fault launching
            EncoderFwdKernel, or no step in 40 s, with model.init_from). The suspect: an embedded run loaded
            the plugins for the planner's calibration, unmapped them (dlclose) under a live CUDA context, and
            loaded them again for its worker; since 152c23f plugins are never unmapped (RTLD_NODELETE). 4 runs
            of 3 steps with init_from in each of three modes: as is; CUDA_MODULE_LOADING=EAGER; the plugins
            LD_PRELOADed. A row per mode: runs that passed, crashed, timed out. A crash left in any mode is
            another cause; a hang names its kernel (timeouts.step_seconds, core/activity.h).
  sanitize  compute-sanitizer (memcheck; racecheck and synccheck on the attention kernels; initcheck) on the
            llm and nn kernel tests' CUDA cases, and memcheck on 2-step runs of keep, recompute, offload,
            init_from and bf16: a row per run with its error count (line 3).
  repeat    10 back-to-back runs of 3 steps each of keep, recompute, offload, auto, init_from and bf16 on
            the device, each against one CPU run of the same job: the worst relative loss difference (1e-4;
            bf16 1e-2, against the CPU's bf16 reference) and the runs that crashed or hung (line 4).
  speed     GPT-2 124M's shape (12 blocks, width 768, 12 heads, T 1024, B 8, byte vocabulary) from one llm.c
            checkpoint: Tessel fp32 against PyTorch fp32 eager (bench/peers/gpt_peer.py) on the same device,
            median step time of 12 steps less 2, MFU against 989 TFLOP/s (H100 SXM / H200 dense bf16), and
            the 4-block model (T 256, B 8) the same way, and the 124M shape in bf16 against PyTorch bf16 with
            autocast, flash attention and (on a GPU) torch.compile, target 0.9x (line 5). Then
            `tessel plan` of the 124M job: its wall time, where it calibrated, its predicted step against the
            measured one (line 6).
  rok       the 124M shape under spill.policy keep, recompute, offload, auto and plan, 8 steps each: median
            step time against peak_resident_activation_bytes, a table and rok.svg; auto within 1.10x keep
            (line 7).
  sampled   sampled R-GCN training on the GPU (line 8): rgcn-sampled-synthetic.toml at 200k nodes with 128
            float features (512-byte rows), one worker, its rows in the pinned store, 2 epochs with
            data.feature_gather = "host" and "zero_copy": the losses agree (1e-6 relative), the zero-copy
            run's summary.json counts its rows read in place (feature_rows_zero_copy, all of its rows), seeds
            per second of both; PyG's NeighborLoader + RGCNConv on the same GPU and graph
            (bench/peers/sampled_peer.py --device cuda); AIFB's RGCN and RGAT, sampled, seeds per second.
            (The zero-copy gather against the pinned copy at 512-byte rows is gather_bench's, which
            device-check.sh runs before this.)

Prints one table (section, case, result, figures, verdict), writes DIR/gpt_check.json and DIR/rok.svg. Exit 0
when every row that ran holds, 1 otherwise.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESSEL = os.path.join(ROOT, "build", "bin", "tessel")
JOB = os.path.join(ROOT, "jobs", "examples", "gpt-shakespeare.toml")
PEER = os.path.join(ROOT, "bench", "peers", "gpt_peer.py")
TEXT = os.path.join(os.path.dirname(ROOT), "shared", "data", "tinyshakespeare", "input.txt")
PEAK_FLOPS = 989e12  # dense bf16, H100 SXM and H200
LOSS_TOLERANCE = 1e-4
SECTIONS = ("diagnose", "repeat", "speed", "rok", "sampled", "sanitize")  # the order they run in: most needed first


class Check:
    def __init__(self, a):
        self.a, self.rows, self.t0 = a, [], time.monotonic()
        self.small = a.small
        # The two shapes: the example's 4 blocks, and GPT-2 124M's (toy sizes with --small).
        self.little = dict(layers=4, width=256, heads=4, context=256, batch=8)
        self.big = dict(layers=12, width=768, heads=12, context=1024, batch=8)
        if a.small:
            self.little = dict(layers=2, width=64, heads=4, context=64, batch=4)
            self.big = dict(layers=3, width=96, heads=4, context=128, batch=4)
        self.work = os.path.join(a.out, "gpt-check")
        os.makedirs(self.work, exist_ok=True)
        self.tokens = os.path.join(self.work, "tokens.bin")
        self.peer([PEER, "make-tokens", TEXT, self.tokens], 120)

    def left(self):
        return self.a.budget - (time.monotonic() - self.t0)

    def row(self, section, case, ok, figures, note=""):
        r = dict(section=section, case=case, ok=ok, figures=figures, note=note)
        self.rows.append(r)
        verdict = {True: "ok", False: "FAIL", None: "-"}[ok]
        print(f"[{section}] {case}: {verdict} {figures} {note}", file=sys.stderr, flush=True)

    def peer(self, args, limit):
        return subprocess.run([sys.executable] + args, capture_output=True, text=True, timeout=limit)

    def checkpoint(self, shape, vocab=256):
        path = os.path.join(self.work, "ck-{layers}-{width}-{heads}-{context}.bin".format(**shape))
        if not os.path.exists(path):
            p = self.peer([PEER, "make-checkpoint", "--layers", str(shape["layers"]), "--width", str(shape["width"]),
                           "--heads", str(shape["heads"]), "--context", str(shape["context"]), "--vocab", str(vocab),
                           "--seed", "7", path], 300)
            if p.returncode != 0:
                raise RuntimeError(f"make-checkpoint: {p.stderr.strip()[-300:]}")
        return path

    def sets(self, shape, steps, device, extra=None):
        s = {"job.device": f'"{device}"', "metrics.port_base": 0, "train.steps": steps, "train.warmup_steps": 1,
             "train.val_every": 0, "checkpoint.every_steps": 0, "train.log_every": 1000,
             "resources.threads_per_worker": os.cpu_count() or 1, "model.layers": shape["layers"],
             "model.hidden": shape["width"], "model.heads": shape["heads"], "model.context": shape["context"],
             "train.batch_size": shape["batch"], "data.format": '"llmc"', "data.train_tokens": f'"{self.tokens}"',
             "data.val_fraction": 0.05}
        s.update(extra or {})
        return [x for k, v in s.items() for x in ("--set", f"{k}={v}")]

    def tessel(self, name, shape, steps, device, extra=None, limit=120, env=None, prefix=()):
        """One `tessel run` of the GPT: (outcome, summary or None, seconds, log); outcome ok | exit N |
        signal N | timeout."""
        return self.run_job(name, JOB, self.sets(shape, steps, device, extra), limit, env, prefix)

    def run_job(self, name, job, set_args, limit=120, env=None, prefix=()):
        out = os.path.join(self.work, name)
        shutil.rmtree(out, ignore_errors=True)
        cmd = list(prefix) + [TESSEL, "run", job] + list(set_args) + ["--set", f'job.output_dir="{out}"']
        t = time.monotonic()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, env=dict(os.environ, **(env or {})))
        except subprocess.TimeoutExpired:
            return "timeout", None, limit, ""
        seconds = time.monotonic() - t
        log = p.stdout + p.stderr
        with open(out + ".log", "w") as f:
            f.write(log)
        if p.returncode != 0:
            return (f"signal {-p.returncode}" if p.returncode < 0 else f"exit {p.returncode}"), None, seconds, log
        return "ok", json.load(open(os.path.join(out, "summary.json"))), seconds, log

    # ---- sections ------------------------------------------------------------------------------------

    def diagnose(self):
        ck = self.checkpoint(self.little)
        plugins = os.path.join(ROOT, "build", "plugins")
        preload = ":".join(os.path.join(plugins, f"libtessel_{p}.so") for p in ("nn", "llm"))
        for mode, env in (("as is", {}), ("CUDA_MODULE_LOADING=EAGER", {"CUDA_MODULE_LOADING": "EAGER"}),
                          ("plugins preloaded", {"LD_PRELOAD": preload})):
            outcomes = []
            for i in range(4):
                o, _, _, _ = self.tessel(f"diagnose-{len(outcomes)}", self.little, 3, self.a.device,
                                         {"model.init_from": f'"{ck}"'}, limit=60, env=env)
                outcomes.append(o)
            passed = outcomes.count("ok")
            self.row("diagnose", f"init_from, embedded, {mode}", passed == len(outcomes),
                     f"{passed}/{len(outcomes)} passed", ", ".join(o for o in outcomes if o != "ok"))

    def sampled(self):
        dev = self.a.device
        nodes = 4000 if self.small else 200000
        graph = os.path.join(self.work, f"sampled-{nodes}.h5")
        base = {"job.device": f'"{dev}"', "resources.workers": 1,
                "resources.threads_per_worker": os.cpu_count() or 1, "metrics.port_base": 0,
                "data.graph": f'"{graph}"', "data.synthetic.nodes": nodes, "data.feature_store": '"pinned"',
                "train.epochs": 2, "train.log_every": 1000}
        args = lambda extra: [x for k, v in dict(base, **extra).items() for x in ("--set", f"{k}={v}")]
        job = os.path.join(ROOT, "jobs", "examples", "rgcn-sampled-synthetic.toml")
        # On the CPU zero_copy is refused (a usage error), so the plumbing run compares host with auto.
        modes = ("host", "zero_copy") if dev == "cuda" else ("host", "auto")
        runs = {}
        for mode in modes:
            o, summary, seconds, log = self.run_job(f"sampled-{mode}", job, args({"data.feature_gather": f'"{mode}"'}),
                                                    limit=300)
            runs[mode] = summary
            if summary is None:
                self.row("sampled", f"synthetic {nodes} nodes, {mode}", False, o, log.strip()[-200:])
        if all(runs.values()):
            a, b = (runs[m] for m in modes)
            worst = max(abs(x - y) / max(abs(x), 1e-12) for x, y in zip(a["epoch_loss"], b["epoch_loss"]))
            same = len(a["epoch_loss"]) == len(b["epoch_loss"]) and worst <= 1e-6
            rows_in_place = b.get("feature_rows_zero_copy", 0)
            counted = (b.get("feature_gather") == "zero_copy" and rows_in_place == b.get("feature_rows_local")
                       and rows_in_place > 0) if dev == "cuda" else rows_in_place == 0
            rate = lambda s: s["epoch_seeds_per_second"][-1]
            self.row("sampled", f"synthetic {nodes} nodes, 128 features: {modes[1]} against host", same and counted,
                     f"worst rel loss {worst:.1e}; seeds/s host {rate(a):.0f}, {modes[1]} {rate(b):.0f}; "
                     f"rows in place {rows_in_place} of {b.get('feature_rows_local')}",
                     f"feature_gather {b.get('feature_gather')}")
        if self.left() > 90:
            p = self.peer([os.path.join(ROOT, "bench", "peers", "sampled_peer.py"), "--system", "pyg", "--graph", graph,
                           "--device", dev, "--threads", str(os.cpu_count() or 1), "--batches", "40",
                           "--max-seconds", "60"], 240)
            try:
                r = json.loads(p.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                r = {"unavailable": p.stderr.strip()[-200:]}
            self.row("sampled", f"PyG NeighborLoader + RGCNConv, same graph, {dev}", None,
                     f"seeds/s {r['seeds_per_second']:.0f}" if "seeds_per_second" in r else "",
                     r.get("unavailable", f"pyg {r.get('pyg')}"))
        for model in ("rgcn", "rgat"):
            if self.left() < 60:
                self.row("sampled", f"AIFB {model}", None, "", "SKIP: budget")
                continue
            o, summary, _, log = self.run_job(
                f"sampled-aifb-{model}", os.path.join(ROOT, "jobs", "examples", f"{model}-aifb.toml"),
                [x for k, v in {"job.device": f'"{dev}"', "resources.workers": 1, "train.mode": '"sampled"',
                                "metrics.port_base": 0, "train.epochs": 5 if self.small else 20}.items()
                 for x in ("--set", f"{k}={v}")], limit=180)
            self.row("sampled", f"AIFB {model}, sampled (one-hot input: no rows to gather)", summary is not None,
                     f"seeds/s {statistics.median(summary['epoch_seeds_per_second']):.0f}" if summary else o,
                     "" if summary else log.strip()[-200:])

    def sanitize(self):
        tool = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
        if self.a.device != "cuda" or not os.path.exists(tool):
            self.row("sanitize", "compute-sanitizer", None, "", "needs a GPU and compute-sanitizer")
            return
        tests = os.path.join(ROOT, "build", "tests", "unit", "plugins")
        runs = [("memcheck", "llm kernels", [f"{tests}/llm/llm_kernels_test", "--gtest_filter=*Cuda*:*CrossDevice*"]),
                ("memcheck", "nn kernels", [f"{tests}/nn/nn_kernels_test", "--gtest_filter=*Cuda*:*CrossDevice*"]),
                ("racecheck", "attention", [f"{tests}/llm/llm_kernels_test", "--gtest_filter=*Attention*Cuda*:*CrossDevice*Attention*"]),
                ("synccheck", "attention", [f"{tests}/llm/llm_kernels_test", "--gtest_filter=*Attention*Cuda*:*CrossDevice*Attention*"]),
                ("initcheck", "llm kernels", [f"{tests}/llm/llm_kernels_test", "--gtest_filter=*Cuda*:*CrossDevice*"])]
        for t, name, cmd in runs:
            self.sanitized(tool, t, name, cmd, 240)
        ck = self.checkpoint(self.little)
        for policy, extra in (("keep", {}), ("recompute", {"spill.policy": '"recompute"'}),
                              ("offload", {"spill.policy": '"offload"'}), ("init_from", {"model.init_from": f'"{ck}"'}),
                              ("bf16", {"train.precision": '"bf16"'})):
            cmd = [TESSEL, "run", JOB] + self.sets(self.little, 2, "cuda", extra) + [
                "--set", f'job.output_dir="{os.path.join(self.work, "sanitize-" + policy)}"']
            self.sanitized(tool, "memcheck", f"2 steps, {policy}", cmd, 300)

    def sanitized(self, tool, t, name, cmd, limit):
        if self.left() < 60:
            self.row("sanitize", f"{t} {name}", None, "", "SKIP: budget")
            return
        try:
            p = subprocess.run([tool, "--tool", t, "--error-exitcode", "99"] + cmd, capture_output=True, text=True,
                               timeout=limit)
        except subprocess.TimeoutExpired:
            self.row("sanitize", f"{t} {name}", False, "", f"timeout {limit} s")
            return
        m = re.search(r"ERROR SUMMARY: (\d+) error", p.stdout + p.stderr)
        errors = int(m.group(1)) if m else None
        first = next((l for l in (p.stdout + p.stderr).splitlines() if l.startswith("========= ") and "ERROR SUMMARY" not in l and l.strip("= ")), "")
        self.row("sanitize", f"{t} {name}", errors == 0 and p.returncode == 0,
                 f"{errors if errors is not None else '?'} errors, exit {p.returncode}", first[:160])

    def repeat(self):
        ck = self.checkpoint(self.little)
        # bf16 against the CPU's bf16 reference: the same roundings, but sums in other orders can round a
        # stored value one bf16 step (2^-8) apart, so its limit is 1e-2.
        for case, extra in (("keep", {}), ("recompute", {"spill.policy": '"recompute"'}),
                            ("offload", {"spill.policy": '"offload"'}), ("auto", {"spill.policy": '"auto"'}),
                            ("init_from", {"model.init_from": f'"{ck}"'}), ("bf16", {"train.precision": '"bf16"'})):
            limit = 1e-2 if case == "bf16" else LOSS_TOLERANCE
            if self.left() < 60:
                self.row("repeat", case, None, "", "SKIP: budget")
                continue
            o, ref, _, _ = self.tessel(f"repeat-{case}-cpu", self.little, 3, "cpu", extra, limit=120)
            if ref is None:
                self.row("repeat", case, False, "", f"the CPU run: {o}")
                continue
            worst, bad = 0.0, []
            for i in range(10 if not self.small else 2):
                o, s, secs, _ = self.tessel(f"repeat-{case}", self.little, 3, self.a.device, extra, limit=60)
                if s is None:
                    bad.append(f"run {i + 1}: {o}")
                    continue
                worst = max([worst] + [abs(x - y) / abs(y) for x, y in zip(s["step_loss"], ref["step_loss"])])
            n = 10 if not self.small else 2
            self.row("repeat", case, not bad and worst <= limit,
                     f"{n - len(bad)}/{n} ran, worst loss difference {worst:.2e} (limit {limit:g})", "; ".join(bad))

    def peer_step(self, shape, ck, precision="fp32", compile_=False):
        out = os.path.join(self.work, f"peer-{shape['layers']}-{precision}{'-compile' if compile_ else ''}.json")
        cmd = [PEER, "train", "--checkpoint", ck, "--tokens", self.tokens, "--batch", str(shape["batch"]),
               "--seq", str(shape["context"]), "--steps", "12", "--lr", "1e-3", "--warmup-steps", "1",
               "--threads", str(os.cpu_count() or 1), "--device", self.a.device, "--precision", precision, "--json", out]
        p = self.peer(cmd + (["--compile"] if compile_ else []), 600)
        if p.returncode != 0:
            return None, p.stderr.strip()[-200:]
        j = json.load(open(out))
        return statistics.median(j["step_ms"][2:]) / 1e3, j["losses"]

    def speed(self):
        measured = {}
        for label, shape in (("124M", self.big), ("4 blocks", self.little)):
            if self.left() < 90:
                self.row("speed", f"{label} fp32", None, "", "SKIP: budget")
                continue
            ck = self.checkpoint(shape)
            o, s, _, _ = self.tessel(f"speed-{shape['layers']}", shape, 12, self.a.device,
                                     {"model.init_from": f'"{ck}"', "train.lr": 1e-3}, limit=300)
            peer, losses = self.peer_step(shape, ck)
            if s is None or peer is None:
                self.row("speed", f"{label} fp32", False, "", f"tessel: {o}; pytorch: {losses if peer is None else 'ok'}")
                continue
            step = statistics.median(s["step_seconds"][2:])
            measured[label] = step
            worst = max(abs(x - y) / abs(y) for x, y in zip(s["step_loss"], losses))
            mfu = s["flops_per_step"] / step / PEAK_FLOPS
            # At --small sizes on a CPU the times say nothing of the GPU: only the losses are judged.
            self.row("speed", f"{label} fp32", worst <= 1e-3 and (self.small or step <= peer),
                     f"Tessel {1e3 * step:.1f} ms, PyTorch eager {1e3 * peer:.1f} ms ({step / peer:.2f}x, target 1.0x), "
                     f"MFU {100 * mfu:.1f}%, losses within {worst:.1e}")
        # bf16 against PyTorch bf16 as its users run it (autocast, flash attention, fused AdamW, and on a GPU
        # torch.compile): the target is 0.9x its step; the losses of two bf16 runs differ by their roundings.
        for label, shape in (("124M", self.big),):
            if self.left() < 120:
                self.row("speed", f"{label} bf16", None, "", "SKIP: budget")
                continue
            ck = self.checkpoint(shape)
            o, s, _, log = self.tessel(f"speed-{shape['layers']}-bf16", shape, 12, self.a.device,
                                       {"model.init_from": f'"{ck}"', "train.lr": 1e-3, "train.precision": '"bf16"'},
                                       limit=300)
            peer, losses = self.peer_step(shape, ck, "bf16", compile_=self.a.device == "cuda")
            if s is None or peer is None:
                self.row("speed", f"{label} bf16", False, "",
                         f"tessel: {o} {log.strip()[-160:] if s is None else ''}; pytorch: {losses if peer is None else 'ok'}")
                continue
            step = statistics.median(s["step_seconds"][2:])
            worst = max(abs(x - y) / abs(y) for x, y in zip(s["step_loss"], losses))
            mfu = s["flops_per_step"] / step / PEAK_FLOPS
            self.row("speed", f"{label} bf16", worst <= 2e-2 and (self.small or step <= 0.9 * peer),
                     f"Tessel {1e3 * step:.1f} ms, PyTorch bf16 {1e3 * peer:.1f} ms ({step / peer:.2f}x, target 0.9x), "
                     f"MFU {100 * mfu:.1f}%, losses within {worst:.1e} (limit 2e-2)")
        if "124M" in measured and self.left() > 60:
            cmd = [TESSEL, "plan", JOB] + self.sets(self.big, 12, self.a.device)
            t = time.monotonic()
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            wall = time.monotonic() - t
            m = re.search(r"predicted step: ([0-9.]+) s", p.stdout)
            where = re.search(r"calibrated here \(([^)]*)\)", p.stdout)
            if p.returncode != 0 or not m:
                self.row("plan", "124M", False, "", f"exit {p.returncode}: {p.stderr.strip()[-200:]}")
            else:
                pred, meas = float(m.group(1)), measured["124M"]
                self.row("plan", "124M", None if self.small else wall <= 5 and abs(pred - meas) <= 0.25 * meas,
                         f"{wall:.1f} s (target 5), calibrated {where.group(1) if where else '?'}, predicted step "
                         f"{1e3 * pred:.1f} ms against {1e3 * meas:.1f} ms measured ({pred / meas:.2f}x, target within 25%)")

    def rok(self):
        points = []
        for policy in ("keep", "recompute", "offload", "auto", "plan"):
            if self.left() < 60:
                self.row("rok", policy, None, "", "SKIP: budget")
                continue
            o, s, _, _ = self.tessel(f"rok-{policy}", self.big, 8, self.a.device, {"spill.policy": f'"{policy}"'},
                                     limit=240)
            if s is None:
                self.row("rok", policy, False, "", o)
                continue
            step = statistics.median(s["step_seconds"][2:])
            points.append((policy, step, s["peak_resident_activation_bytes"]))
            self.row("rok", policy, None, f"{1e3 * step:.1f} ms a step, {s['peak_resident_activation_bytes'] / 2**20:.0f} MiB "
                                          f"resident activations")
        by = {p: (t, b) for p, t, b in points}
        if "keep" in by and "auto" in by:
            r = by["auto"][0] / by["keep"][0]
            self.row("rok", "auto / keep", None if self.small else r <= 1.10, f"{r:.3f} (target <= 1.10)")
        if points:
            write_svg(os.path.join(self.a.out, "rok.svg"), points)


def write_svg(path, points):
    """Step time (ms) against peak resident activation bytes (MiB), one labelled point per policy."""
    w, h, pad = 480, 320, 50
    xs = [b / 2**20 for _, _, b in points]
    ys = [1e3 * t for _, t, _ in points]
    x0, x1 = 0, max(xs) * 1.1 or 1
    y0, y1 = 0, max(ys) * 1.1 or 1
    sx = lambda x: pad + (w - 2 * pad) * (x - x0) / (x1 - x0)
    sy = lambda y: h - pad - (h - 2 * pad) * (y - y0) / (y1 - y0)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
             f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="black"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="black"/>',
             f'<text x="{w / 2}" y="{h - 12}" text-anchor="middle">peak resident activations (MiB)</text>',
             f'<text x="14" y="{h / 2}" transform="rotate(-90 14 {h / 2})" text-anchor="middle">step time (ms)</text>',
             f'<text x="{pad}" y="{h - pad + 14}" text-anchor="middle">0</text>',
             f'<text x="{w - pad}" y="{h - pad + 14}" text-anchor="middle">{x1:.0f}</text>',
             f'<text x="{pad - 4}" y="{pad}" text-anchor="end">{y1:.0f}</text>']
    for (policy, _, _), x, y in zip(points, xs, ys):
        parts.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="4" fill="steelblue"/>')
        parts.append(f'<text x="{sx(x) + 6:.1f}" y="{sy(y) - 6:.1f}">{policy}</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sections", default=",".join(SECTIONS))
    ap.add_argument("--budget", type=float, default=480, help="seconds for all the sections")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--small", action="store_true", help="toy shapes and fewer repeats: checks the plumbing")
    a = ap.parse_args(argv)
    sections = [s for s in a.sections.split(",") if s]
    bad = [s for s in sections if s not in SECTIONS]
    if bad:
        ap.error(f"unknown section(s): {', '.join(bad)}")
    os.makedirs(a.out, exist_ok=True)
    c = Check(a)
    for s in sections:
        t = time.monotonic()
        try:
            getattr(c, s)()
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
            c.row(s, "section", False, "", f"stopped: {e}")
        print(f"[{s}] {time.monotonic() - t:.0f} s", file=sys.stderr, flush=True)
    print(f"\nGPT on {a.device}{' (small shapes)' if a.small else ''}: {time.monotonic() - c.t0:.0f} s")
    print(f"| section | case | holds | figures | note |\n|---|---|---|---|---|")
    for r in c.rows:
        print(f"| {r['section']} | {r['case']} | {dict([(True, 'yes'), (False, 'NO'), (None, '-')])[r['ok']]} | "
              f"{r['figures']} | {r['note']} |")
    with open(os.path.join(a.out, "gpt_check.json"), "w") as f:
        json.dump(dict(device=a.device, small=a.small, seconds=time.monotonic() - c.t0, rows=c.rows), f, indent=1)
    return 1 if any(r["ok"] is False for r in c.rows) else 0


if __name__ == "__main__":
    sys.exit(main())
