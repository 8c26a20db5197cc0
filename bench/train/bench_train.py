"""Training throughput of chorus.torch and of DDP over Chorus against DDP over Gloo, in one run, on
CPU, on one host or across emulated hosts (./chorus.sh bench-train):

    PYTHONPATH=build/bindings/python /usr/bin/python3 bench/train/bench_train.py \
        --chorusrun build/bindings/cli/chorusrun [--ranks 1,2] [--models mlp,cnn] [--steps 20] \
        [--repeat 3] [--impls chorus,ddp_chorus,ddp_gloo,solo] [--batch 64] \
        [--emulated-hosts H [--ranks-per-host L] [--link R --flow R] [--slow R] [--slow-fraction F]]

Implementations: chorus (chorus.torch's DistributedOptimizer), chorus_fp16 (the same with
Compression.fp16), chorus_overlap (overlap=True: step() does not wait, the next forward does),
chorus_nopri (CHORUS_PRIORITY=0: gradients in agreed order); the suffixes combine
(chorus_fp16_overlap, chorus_overlap_nopri, ...);
ddp_chorus (DistributedDataParallel over torch.distributed's "chorus" backend), ddp_gloo (the
same over Gloo; `ddp` is its old name) and solo (every rank trains alone at the same time: the
compute-only rate). Models: mlp and cnn below, transformer (BERT-base sized: 12 layers,
d_model 768, 12 heads, sequence 128, on random tokens; samples are sequences), or any
torchvision model by name (alexnet, resnet18, resnet50, vgg11, ...) on synthetic ImageNet-sized
batches (3x224x224, 1000 classes).

For each model, implementation and N it starts N worker processes under chorusrun (local ranks,
or with --emulated-hosts H, N = H x L ranks across H emulated hosts of bench/hosts/hosts.sh, every
implementation on the same shaped network, brought up once), one thread per rank, --batch per
rank, --warmup steps then the timed steps. The host is shared and noisy, so every configuration runs
--repeat times, interleaved (the order of the implementations alternates from one repetition
to the next), and the median is printed:

    RESULT train <model> <impl> <N> <samples_per_s>
    RESULT train_cpu <model> <impl> <N> <ms_per_step>

samples/s counts every rank's samples: N * batch * steps / (slowest rank's time). train_cpu is
the CPU time per step that rank 0's threads other than the training thread used (the
communication library's threads: the cost it takes from training on a shared core), median
over the repetitions. Impl `solo` (in the default set) trains N processes at the same time with
no communication at all: the ceiling that co-running N trainers on this host allows. Closing
lines give chorus/ddp and the scaling efficiency (N=2 ÷ twice N=1) of each implementation, from
the medians and paired (the median of the ratios within each repetition).
Models: an MLP of about 6.3 M parameters (25 MB of float32 gradients: communication-heavy) and
a small ResNet-like CNN of about 0.3 M parameters (compute-heavy).
When solo is in the run, each implementation's rate against solo's of the same N also comes as

    RESULT train_hosts <impl> <N> <model> <samples_per_s_total> <scaling>

(scaling: the median rate ÷ solo's median rate; solo's own line reads 1)."""

import argparse
import os
import subprocess
import socket
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
HOSTS_SH = os.path.join(HERE, "..", "hosts", "hosts.sh")
IMPL_NAMES = {"ddp": "ddp_gloo"}  # the old name of DDP over Gloo


def free_port():
    """A port free on 127.0.0.1 now (bench_paired.py's Gloo store)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------- models

SEQUENCE, VOCAB = 128, 30522  # the transformer's: BERT-base's sequence length and vocabulary


def make_transformer():
    import torch.nn as nn

    class Encoder(nn.Module):
        """BERT-base sized: token and position embeddings, 12 encoder layers, a 2-way head."""

        def __init__(self):
            super().__init__()
            self.tokens = nn.Embedding(VOCAB, 768)
            self.positions = nn.Embedding(SEQUENCE, 768)
            layer = nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 12)
            self.head = nn.Linear(768, 2)

        def forward(self, x):
            import torch
            pos = torch.arange(x.shape[1], device=x.device)
            return self.head(self.encoder(self.tokens(x) + self.positions(pos)).mean(dim=1))

    return Encoder()


def make_model(name):
    import torch.nn as nn

    if name == "transformer":
        return make_transformer()
    if name not in ("mlp", "cnn"):
        import torchvision
        return getattr(torchvision.models, name)(num_classes=1000)
    if name == "mlp":
        # 1024*2048 + 2048*2048 + 2048*10 weights (+ biases): 6.31 M parameters.
        return nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                             nn.Linear(2048, 10))

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.skip = nn.Sequential() if stride == 1 and cin == cout else nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            self.relu = nn.ReLU()

        def forward(self, x):
            y = self.relu(self.b1(self.c1(x)))
            return self.relu(self.b2(self.c2(y)) + self.skip(x))

    # About 0.3 M parameters on 3x32x32 inputs.
    return nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
                         Block(32, 32, 1), Block(32, 64, 2), Block(64, 128, 2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))


def make_batch(name, batch):
    import torch
    g = torch.Generator().manual_seed(0)
    if name == "transformer":
        return torch.randint(0, VOCAB, (batch, SEQUENCE), generator=g), torch.randint(0, 2, (batch,), generator=g)
    if name not in ("mlp", "cnn"):  # torchvision: ImageNet-sized
        return torch.randn(batch, 3, 224, 224, generator=g), torch.randint(0, 1000, (batch,), generator=g)
    x = torch.randn(batch, 1024, generator=g) if name == "mlp" else torch.randn(batch, 3, 32, 32, generator=g)
    return x, torch.randint(0, 10, (batch,), generator=g)


# ------------------------------------------------------------------------------- worker

def other_threads_cpu_ns():
    """CPU time (ns) used so far by this process' threads other than the calling one, from
    /proc/self/task/*/schedstat (threads that ended are not counted: none end mid-run)."""
    me = str(threading.get_native_id())
    total = 0
    for tid in os.listdir("/proc/self/task"):
        if tid == me:
            continue
        try:
            with open("/proc/self/task/%s/schedstat" % tid) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # the thread ended between listdir and open
    return total


def worker(args):
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(1)
    torch.manual_seed(1)
    model = make_model(args.model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    if args.impl == "solo":  # no communication: N independent trainers on the same host
        rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        net = model

        def barrier():
            pass

        def slowest(seconds):
            return seconds
    elif args.impl.startswith("chorus"):  # chorus, chorus_fp16, chorus_nopri
        import chorus.torch as hvd
        hvd.init()
        rank, n = hvd.rank(), hvd.size()
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        compression = hvd.Compression.fp16 if "fp16" in args.impl else hvd.Compression.none
        opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(), compression=compression,
                                       overlap="overlap" in args.impl)
        net = model

        def barrier():
            hvd.barrier()

        def slowest(seconds):
            return hvd.allreduce(torch.tensor([seconds], dtype=torch.float64), op=hvd.Max, name="time").item()
    else:  # ddp_gloo, ddp_chorus
        import torch.distributed as dist
        import chorus.torch.distributed  # noqa: F401  (registers "chorus")
        rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        dist.init_process_group("gloo" if args.impl == "ddp_gloo" else "chorus", rank=rank, world_size=n)
        net = torch.nn.parallel.DistributedDataParallel(model) if n > 1 else model

        def barrier():
            if n > 1:
                dist.barrier()

        def slowest(seconds):
            t = torch.tensor([seconds], dtype=torch.float64)
            if n > 1:
                dist.all_reduce(t, op=dist.ReduceOp.MAX)
            return t.item()

    x, y = make_batch(args.model, args.batch)

    def step():
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    barrier()
    cpu_before = other_threads_cpu_ns()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    if "overlap" in args.impl:
        opt.state_dict()  # the last step's updates, still pending, count too
    elapsed = time.perf_counter() - start
    bg_ms = (other_threads_cpu_ns() - cpu_before) / 1e6 / args.steps
    elapsed = slowest(elapsed)
    if rank == 0 or args.impl == "solo":
        params = sum(p.numel() for p in model.parameters())
        print("WORKER %s %s %d %.2f %d %.3f" % (args.model, args.impl, n, n * args.batch * args.steps / elapsed,
                                               params, bg_ms), flush=True)
    if args.impl.startswith("chorus"):
        hvd.shutdown()
    elif args.impl.startswith("ddp"):
        # torch 1.13's teardown of DDP + the Gloo process group can deadlock (~ProcessGroupGloo
        # joins a Gloo thread that waits for the GIL the joining thread holds): after a barrier,
        # leave without it.
        if n > 1:
            dist.barrier()
        sys.stdout.flush()
        os._exit(0)


# ------------------------------------------------------------------------------- driver

def run_job(args, model, impl, n):
    """Runs one job; returns (samples/s of the job, parameters, background CPU ms per step)."""
    me = [sys.executable, os.path.abspath(__file__), "--worker", "--worker-model", model, "--impl", impl,
          "--batch", str(args.batch), "--steps", str(args.steps), "--warmup", str(args.warmup)]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", CHORUS_METRICS_PORT="0")
    if "nopri" in impl:
        env["CHORUS_PRIORITY"] = "0"
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)  # chorusrun sets them for every implementation
    launch = [args.chorusrun, "-np", str(n), "--no-prefix", "--timeout", str(args.timeout)]
    if "nopri" in impl:
        launch += ["-x", "CHORUS_PRIORITY=0"]
    if os.environ.get("CHORUS_HOSTS_ADDRS"):  # inside hosts.sh run: every rank on its emulated host
        hosts = ",".join("%s:%d" % (a, args.ranks_per_host) for a in os.environ["CHORUS_HOSTS_ADDRS"].split(","))
        launch += ["-H", hosts, "--launcher", HOSTS_SH + " exec {host}", "-x", "GLOO_SOCKET_IFNAME=eth0"]
    procs = [subprocess.Popen(launch + ["--"] + me, env=env, stdout=subprocess.PIPE, text=True)]
    out = wait_all(procs, args.timeout + 30)
    results = [line.split() for line in out.splitlines() if line.startswith("WORKER ")]
    if impl == "solo" and len(results) == n:  # independent trainers: the job's rate is their sum
        return (sum(float(r[4]) / n for r in results), int(results[0][5]), float(results[0][6]))
    if impl != "solo" and results:
        return float(results[0][4]), int(results[0][5]), float(results[0][6])
    raise RuntimeError("%s %s N=%d printed no result (exit codes %s):\n%s"
                       % (model, impl, n, [p.returncode for p in procs], out))


def wait_all(procs, timeout):
    """Waits for every process; when one fails or the time is up, stops the others (a DDP
    worker whose peer died would otherwise wait forever). Returns their joined stdout."""
    deadline = time.monotonic() + timeout
    try:
        while any(p.poll() is None for p in procs):
            if any(p.returncode not in (None, 0) for p in procs) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return "".join(p.communicate()[0] or "" for p in procs)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--worker-model", dest="model", default="mlp", help=argparse.SUPPRESS)
    p.add_argument("--impl", default="chorus")
    p.add_argument("--models", default="mlp,cnn")
    p.add_argument("--impls", default="chorus,ddp_gloo,solo",
                   help="any of chorus[_fp16][_overlap][_nopri], ddp_chorus, ddp_gloo (ddp), solo")
    p.add_argument("--model", dest="models", help="one model (the same as --models M)")
    p.add_argument("--ranks", default=None, help="rank counts to run (default 1,2; with --emulated-hosts: H x L)")
    p.add_argument("--emulated-hosts", type=int, default=0, help="H emulated hosts (bench/hosts/hosts.sh; root)")
    p.add_argument("--ranks-per-host", type=int, default=1)
    p.add_argument("--link", help="each host's link rate (tc units), as hosts.sh")
    p.add_argument("--flow", help="each connection's cap, as hosts.sh")
    p.add_argument("--slow", help="the slow connections' cap, as hosts.sh")
    p.add_argument("--slow-fraction", help="the share of slow connections, as hosts.sh")
    p.add_argument("--port-bits", help="connection classes 2^B, as hosts.sh")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeat", type=int, default=3, help="runs of every configuration, interleaved")
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument("--chorusrun", default=os.path.join(HERE, "..", "..", "build", "bindings", "cli", "chorusrun"))
    args = p.parse_args()
    if args.worker:
        return worker(args)
    if args.emulated_hosts and not os.environ.get("CHORUS_HOSTS_ADDRS"):
        return on_emulated_hosts(args)
    impls = [IMPL_NAMES.get(i, i) for i in args.impls.split(",")]
    if args.ranks:
        ranks = [int(r) for r in args.ranks.split(",")]
    else:
        ranks = [args.emulated_hosts * args.ranks_per_host] if args.emulated_hosts else [1, 2]
    for model in args.models.split(","):
        runs, params = {}, 0
        for rep in range(args.repeat):
            order = impls if rep % 2 == 0 else impls[::-1]
            for n in ranks:
                for impl in order:
                    if impl == "solo" and n == 1 and "ddp_gloo" in impls:
                        continue  # the same as DDP at N=1 (a plain model, no communication)
                    sps, params, bg = run_job(args, model, impl, n)
                    runs.setdefault((impl, n), []).append((sps, bg))
                    print("  run %d: %s %s N=%d %.1f samples/s, other threads %.2f ms CPU/step"
                          % (rep + 1, model, impl, n, sps, bg), file=sys.stderr, flush=True)
        med = {}
        for (impl, n), rs in sorted(runs.items()):
            med[(impl, n)] = statistics.median(r[0] for r in rs)
            print("RESULT train %s %s %d %.1f" % (model, impl, n, med[(impl, n)]), flush=True)
            print("RESULT train_cpu %s %s %d %.2f" % (model, impl, n, statistics.median(r[1] for r in rs)),
                  flush=True)
        print("  (%s: %.2f M parameters, batch %d per rank, %d timed steps, median of %d interleaved runs: %s)"
              % (model, params / 1e6, args.batch, args.steps, args.repeat,
                 "; ".join("%s N=%d %s" % (i, n, "/".join("%.1f" % r[0] for r in rs))
                           for (i, n), rs in sorted(runs.items()))), file=sys.stderr)
        # The host drifts over minutes, so ratios are also taken within each repetition (runs
        # minutes apart at most) and summarised by their median: "paired".
        def ratios(num, den, scale=1):
            a, b = runs.get(num, []), runs.get(den, [])
            return [x[0] / (scale * y[0]) for x, y in zip(a, b)]

        def show(label, num, den, scale=1):
            r = ratios(num, den, scale)
            if r and num in med and den in med:
                print("  %s %s: %.3f of medians; paired %.3f (per repetition %s)"
                      % (model, label, med[num] / (scale * med[den]), statistics.median(r),
                         "/".join("%.3f" % x for x in r)), file=sys.stderr)

        for n in ranks:
            show("N=%d chorus/ddp_gloo" % n, ("chorus", n), ("ddp_gloo", n))
            show("N=%d ddp_chorus/ddp_gloo" % n, ("ddp_chorus", n), ("ddp_gloo", n))
            for impl in impls:
                if ("solo", n) in med and (impl, n) in med:
                    print("RESULT train_hosts %s %d %s %.2f %.3f" % (impl, n, model, med[(impl, n)],
                                                                    med[(impl, n)] / med[("solo", n)]), flush=True)
                    show("%s N=%d scaling (÷ solo)" % (impl, n), (impl, n), ("solo", n))
        for impl in impls:
            base = (impl if impl != "solo" else "ddp_gloo", 1)  # solo's N=1 is DDP's (a plain model)
            for n in ranks:
                if n > 1 and base in med and (impl, n) in med:
                    show("%s N=%d scaling efficiency" % (impl, n), (impl, n), base, n)
    return 0


def on_emulated_hosts(args):
    """Brings the emulated hosts up once (hosts.sh run: removed on exit), and runs this benchmark
    inside them."""
    shaping = []
    for flag in ("link", "flow", "slow", "slow_fraction", "port_bits"):
        value = getattr(args, flag)
        if value:
            shaping += ["--" + flag.replace("_", "-"), value]
    inner = [a for a in sys.argv[1:]]
    return subprocess.call([HOSTS_SH, "run", str(args.emulated_hosts)] + shaping +
                           ["--", sys.executable, os.path.abspath(__file__)] + inner)


if __name__ == "__main__":
    sys.exit(main())
