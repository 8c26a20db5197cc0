"""chorus.torch against torch DDP (gloo) in the same two processes, alternating block by block.

    PYTHONPATH=build/bindings/python /usr/bin/python3 bench/train/bench_paired.py \
        --chorusrun build/bindings/cli/chorusrun [--models mlp,cnn] [--rounds 10] [--steps 4] \
        [--compression fp16]

bench_train.py starts a fresh job per configuration, minutes apart; on this shared host one
trainer alone on a pinned core drifts between 64 and 120 samples/s from one minute to the next,
so its ratios carry that drift. Here one job of two ranks (under chorusrun, with a Gloo process
group beside Chorus) holds four copies of the same model and, in every round, trains each for
--warm untimed steps (1) and then --steps timed steps (4), in turn:

    chorus  N=2: the model under chorus.torch's DistributedOptimizer
    ddp     N=2: the model under DistributedDataParallel (gloo)
    solo    N=2: both ranks train a plain model, no communication (the ceiling of two trainers)
    plain   N=1: rank 0 trains a plain model while rank 1 waits in a Gloo barrier

The order of the four turns is shuffled every round (seeded by the round, the same on both
ranks): a fixed rotation put chorus after plain in three rounds of four. --control trains a
second DDP copy in chorus' turn, and prints its ratio as ddpcopy/ddp: how far from 1 the
bench itself is. --compression fp16 (or bf16) pairs chorus.torch's Compression.fp16 (cast on the
wire by the runtime) with DDP under torch's fp16_compress_hook (bf16_compress_hook). Ratios are taken within each round (blocks seconds apart) and summarised by
their median:

    RESULT train <model> <impl> <N> <samples_per_s>      median over rounds
    RESULT paired <model> <what> <median ratio>          chorus/ddp, and scaling efficiencies
                                                         (N=2 rate / twice plain N=1's)

One thread per rank for torch, batch 64 per rank, the models of bench_train.py. The library
that is not being measured sits idle in the same process (Chorus' threads sleep; Gloo's wait
on sockets)."""

import argparse
import copy
import os
import random
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_train import free_port, make_batch, make_model, other_threads_cpu_ns  # noqa: E402

IMPLS = ["chorus", "ddp", "solo", "plain"]


def worker(args):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    import chorus.torch as hvd

    torch.set_num_threads(1)
    hvd.init()
    rank, n = hvd.rank(), hvd.size()
    if n != 2:
        raise SystemExit("bench_paired runs with exactly two ranks, got %d" % n)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%s" % os.environ["PAIRED_GLOO_PORT"],
                            rank=rank, world_size=n)
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    compression = {"none": hvd.Compression.none, "fp16": hvd.Compression.fp16,
                   "bf16": hvd.Compression.bf16}[args.compression]
    hook = {"none": None, "fp16": default_hooks.fp16_compress_hook,
            "bf16": getattr(default_hooks, "bf16_compress_hook", None)}[args.compression]
    if args.compression != "none" and hook is None:
        raise SystemExit("bench_paired: this torch has no %s_compress_hook for DDP" % args.compression)
    for model_name in args.models.split(","):
        torch.manual_seed(1)
        base = make_model(model_name)
        nets, opts = {}, {}
        for impl in IMPLS:
            m = copy.deepcopy(base)
            opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
            ddp = impl == "ddp" or (impl == "chorus" and args.control)
            if impl == "chorus" and not args.control:
                opt = hvd.DistributedOptimizer(opt, named_parameters=[(model_name + "." + k, p)
                                                                      for k, p in m.named_parameters()],
                                               compression=compression)
            nets[impl] = torch.nn.parallel.DistributedDataParallel(m) if ddp else m
            if ddp and hook is not None:
                nets[impl].register_comm_hook(None, hook)
            opts[impl] = opt
        x, y = make_batch(model_name, args.batch)

        def step(impl):
            opts[impl].zero_grad()
            F.cross_entropy(nets[impl](x), y).backward()
            opts[impl].step()

        rates = {impl: [] for impl in IMPLS}
        bg = {impl: [] for impl in IMPLS}
        for r in range(args.rounds):
            order = random.Random(r).sample(IMPLS, len(IMPLS))  # the same on both ranks
            for impl in order:
                trains = impl != "plain" or rank == 0
                if trains:
                    for _ in range(args.warm):
                        step(impl)  # untimed: the caches now hold this model, not the last one
                dist.barrier()
                cpu_before = other_threads_cpu_ns()
                start = time.perf_counter()
                if trains:
                    for _ in range(args.steps):
                        step(impl)
                elapsed = time.perf_counter() - start
                cpu_ms = (other_threads_cpu_ns() - cpu_before) / 1e6 / args.steps
                if impl == "plain":
                    dist.barrier()  # rank 1 waits here, asleep, while rank 0 trains alone
                # Every rank's time, gathered outside the timed region.
                t = torch.tensor([elapsed if trains else 0.0, 1.0 if trains else 0.0], dtype=torch.float64)
                all_t = [torch.zeros(2, dtype=torch.float64) for _ in range(n)]
                dist.all_gather(all_t, t)
                samples = args.batch * args.steps
                if impl == "solo":  # independent trainers: the rate is their sum
                    rate = sum(samples / float(v[0]) for v in all_t)
                elif impl == "plain":
                    rate = samples / float(all_t[0][0])
                else:  # a synchronous job runs at its slowest rank's pace
                    rate = n * samples / max(float(v[0]) for v in all_t)
                rates[impl].append(rate)
                bg[impl].append(cpu_ms)
        if rank == 0:
            for impl in IMPLS:
                print("WORKER %s %s %s %s" % (model_name, impl, ",".join("%.2f" % v for v in rates[impl]),
                                              ",".join("%.3f" % v for v in bg[impl])), flush=True)
        dist.barrier()
    hvd.shutdown()
    # torch 1.13's teardown of the Gloo process group can deadlock (see bench_train.py).
    sys.stdout.flush()
    os._exit(0)


def report(model_name, rates, bg, batch, steps, control=False, compression="none"):
    n_of = {"chorus": 2, "ddp": 2, "solo": 2, "plain": 1}
    for impl in IMPLS:
        print("RESULT train %s %s %d %.1f" % (model_name, impl, n_of[impl], statistics.median(rates[impl])))
        print("RESULT train_cpu %s %s %d %.2f" % (model_name, impl, n_of[impl], statistics.median(bg[impl])))

    def paired(label, num, den, scale):
        per_round = [a / (scale * b) for a, b in zip(rates[num], rates[den])]
        print("RESULT paired %s %s %.3f" % (model_name, label, statistics.median(per_round)))
        print("  %s %s per round: %s" % (model_name, label, " ".join("%.3f" % v for v in per_round)),
              file=sys.stderr)

    paired("ddpcopy/ddp" if control else "chorus/ddp", "chorus", "ddp", 1)
    for impl in ("chorus", "ddp", "solo"):
        paired("%s_scaling" % ("ddpcopy" if control and impl == "chorus" else impl), impl, "plain", 2)
    print("  (%s%s: batch %d per rank, %d timed steps per block, %d rounds; samples/s per round: %s)"
          % (model_name, "" if compression == "none" else " compression " + compression, batch, steps, len(rates["chorus"]),
             "; ".join("%s %s" % (i, "/".join("%.1f" % v for v in rates[i])) for i in IMPLS)), file=sys.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--models", default="mlp,cnn")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=4, help="timed steps per block")
    p.add_argument("--warm", type=int, default=1, help="untimed steps at the start of each block")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--timeout", type=int, default=1800)
    p.add_argument("--compression", default="none", choices=["none", "fp16", "bf16"],
                   help="chorus: Compression.<c> (on the wire); ddp: torch's <c>_compress_hook")
    p.add_argument("--control", action="store_true", help="a second DDP copy in chorus' turn (the bench's own bias)")
    p.add_argument("--chorusrun", default=os.path.join(HERE, "..", "..", "build", "bindings", "cli", "chorusrun"))
    args = p.parse_args()
    if args.worker:
        return worker(args)
    me = [sys.executable, os.path.abspath(__file__), "--worker", "--models", args.models, "--batch",
          str(args.batch), "--steps", str(args.steps), "--warm", str(args.warm), "--rounds", str(args.rounds),
          "--compression", args.compression]
    if args.control:
        me.append("--control")
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", CHORUS_METRICS_PORT="0",
               PAIRED_GLOO_PORT=str(free_port()))
    proc = subprocess.run([args.chorusrun, "-np", "2", "--no-prefix", "--timeout", str(args.timeout), "--"] + me,
                          env=env, stdout=subprocess.PIPE, text=True, timeout=args.timeout + 60)
    results = [line.split() for line in proc.stdout.splitlines() if line.startswith("WORKER ")]
    if proc.returncode != 0 or not results:
        sys.stderr.write(proc.stdout)
        raise SystemExit("bench_paired: the job failed (exit %d)" % proc.returncode)
    by_model = {}
    for _, model_name, impl, rates, bgs in results:
        by_model.setdefault(model_name, ({}, {}))
        by_model[model_name][0][impl] = [float(v) for v in rates.split(",")]
        by_model[model_name][1][impl] = [float(v) for v in bgs.split(",")]
    for model_name, (rates, bg) in by_model.items():
        report(model_name, rates, bg, args.batch, args.steps, args.control, args.compression)
    return 0


if __name__ == "__main__":
    sys.exit(main())
