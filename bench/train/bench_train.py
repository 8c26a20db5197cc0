"""Training throughput of chorus.torch against torch DDP (gloo), in one run, on CPU.

    PYTHONPATH=build/bindings/python python3 bench/train/bench_train.py \
        --chorusrun build/bindings/cli/chorusrun [--ranks 1,2] [--models mlp,cnn] [--steps 20]

For each model, implementation and N it starts N worker processes on 127.0.0.1 (chorus.torch
under chorusrun; DDP with its own rendezvous), one thread per rank, batch 64 per rank, 3
warm-up steps then the timed steps, and prints

    RESULT train <model> <impl> <N> <samples_per_s>

samples/s counts every rank's samples: N * batch * steps / (slowest rank's time).
Models: an MLP of about 6.3 M parameters (25 MB of float32 gradients: communication-heavy) and
a small ResNet-like CNN of about 0.3 M parameters (compute-heavy)."""

import argparse
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------- models

def make_model(name):
    import torch.nn as nn

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
    x = torch.randn(batch, 1024, generator=g) if name == "mlp" else torch.randn(batch, 3, 32, 32, generator=g)
    return x, torch.randint(0, 10, (batch,), generator=g)


# ------------------------------------------------------------------------------- worker

def worker(args):
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(1)
    torch.manual_seed(1)
    model = make_model(args.model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    if args.impl == "chorus":
        import chorus.torch as hvd
        hvd.init()
        rank, n = hvd.rank(), hvd.size()
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
        net = model

        def barrier():
            hvd.barrier()

        def slowest(seconds):
            return hvd.allreduce(torch.tensor([seconds], dtype=torch.float64), op=hvd.Max, name="time").item()
    else:
        import torch.distributed as dist
        rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        dist.init_process_group("gloo", rank=rank, world_size=n)
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
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    elapsed = slowest(time.perf_counter() - start)
    if rank == 0:
        params = sum(p.numel() for p in model.parameters())
        print("WORKER %s %s %d %.2f %d" % (args.model, args.impl, n, n * args.batch * args.steps / elapsed, params),
              flush=True)
    if args.impl == "chorus":
        hvd.shutdown()
    else:
        dist.destroy_process_group()


# ------------------------------------------------------------------------------- driver

def run_job(args, model, impl, n):
    me = [sys.executable, os.path.abspath(__file__), "--worker", "--model", model, "--impl", impl,
          "--batch", str(args.batch), "--steps", str(args.steps), "--warmup", str(args.warmup)]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", CHORUS_METRICS_PORT="0")
    if impl == "chorus":
        procs = [subprocess.Popen([args.chorusrun, "-np", str(n), "--no-prefix", "--timeout", str(args.timeout),
                                   "--"] + me, env=env, stdout=subprocess.PIPE, text=True)]
    else:
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(n))
        procs = [subprocess.Popen(me, env=dict(env, RANK=str(r), LOCAL_RANK=str(r)), stdout=subprocess.PIPE,
                                  text=True) for r in range(n)]
    out = ""
    try:
        for p in procs:
            out += p.communicate(timeout=args.timeout + 30)[0]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for line in out.splitlines():
        if line.startswith("WORKER "):
            _, m, i, nn, sps, params = line.split()
            return float(sps), int(params)
    raise RuntimeError("%s %s N=%d printed no result (exit codes %s):\n%s"
                       % (model, impl, n, [p.returncode for p in procs], out))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", default="mlp")
    p.add_argument("--impl", default="chorus")
    p.add_argument("--models", default="mlp,cnn")
    p.add_argument("--impls", default="chorus,ddp")
    p.add_argument("--ranks", default="1,2")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument("--chorusrun", default=os.path.join(HERE, "..", "..", "build", "bindings", "cli", "chorusrun"))
    args = p.parse_args()
    if args.worker:
        return worker(args)
    for model in args.models.split(","):
        for n in [int(r) for r in args.ranks.split(",")]:
            for impl in args.impls.split(","):
                sps, params = run_job(args, model, impl, n)
                print("RESULT train %s %s %d %.1f" % (model, impl, n, sps), flush=True)
                print("  (%s: %.2f M parameters, batch %d per rank, %d timed steps)"
                      % (model, params / 1e6, args.batch, args.steps), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
