"""The GPU targets of chorus.torch, each beside its peer in the same run, on the machine's one
GPU: (1) one rank, 256 MiB float32 allreduce: Chorus (NCCL path) vs torch.distributed NCCL;
(2) two ranks sharing the GPU (Chorus stages through host memory): Chorus vs torch.distributed
gloo on the same CUDA tensors. Prints and writes OUTDIR/gpu_bench.txt: the workers' RESULT
lines and `RATIO <what> <chorus/peer>` lines.
Usage: torch_gpu_bench.py OUTDIR [BUILD_DIR] (default BUILD_DIR: ./build)."""

import glob
import os
import random
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(chorusrun, pkg, np, kind, nbytes, iters, extra_env=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = pkg + os.pathsep + env.get("PYTHONPATH", "")
    env["BENCH_TORCH_PORT"] = str(random.randint(20000, 40000))
    env.setdefault("CHORUS_METRICS_PORT", "0")
    env.update(extra_env or {})
    cmd = [chorusrun, "-np", str(np), "--timeout", "150", "--", sys.executable,
           os.path.join(HERE, "_torch_worker.py"), kind, str(nbytes), str(iters)]
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=170)
        out = p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        out = "TIMEOUT %s\n%s" % (cmd, e.stdout or "")
    lines = [l[l.index("RESULT"):] for l in out.splitlines() if "RESULT" in l]
    if not lines:
        return None, "FAILED %s np=%d %d bytes:\n%s" % (kind, np, nbytes, out[-3000:])
    f = lines[-1].split()
    return {"seconds": float(f[4]), "algbw": float(f[5]), "busbw": float(f[6])}, lines[-1]


def main():
    out_dir = sys.argv[1]
    build = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.getcwd(), "build")
    chorusrun = os.path.join(build, "bindings", "cli", "chorusrun")
    import torch
    if not torch.cuda.is_available():
        print("SKIP: torch sees no CUDA device")
        return 0
    mods = glob.glob(os.path.join(build, "**", "_chorus_torch*.so"), recursive=True)
    if not mods:
        print("SKIP: no _chorus_torch module under %s" % build)
        return 0
    pkg = os.path.dirname(os.path.dirname(mods[0]))  # .../chorus/_chorus_torch.so -> the folder holding chorus/
    report = []

    def say(line):
        print(line, flush=True)
        report.append(line)

    mib = 1 << 20
    pairs = [("nccl_1rank_256MiB", 1, 256 * mib, 20, "chorus", "torch-nccl", "algbw", {}),
             ("nccl_1rank_256MiB_cycle0", 1, 256 * mib, 20, "chorus", "torch-nccl", "algbw",
              {"CHORUS_CYCLE_TIME_MS": "0"}),
             ("staging_2ranks_64MiB", 2, 64 * mib, 10, "chorus", "torch-gloo", "busbw", {}),
             ("staging_2ranks_256MiB", 2, 256 * mib, 5, "chorus", "torch-gloo", "busbw", {}),
             ("host_1rank_256MiB", 1, 256 * mib, 10, "chorus", "torch-nccl", "algbw", {"CHORUS_GPU_OPERATIONS": "host"})]
    for name, np, nbytes, iters, mine, peer, metric, env in pairs:
        a, la = run(chorusrun, pkg, np, mine, nbytes, iters, env)
        say("%s %s" % (name, la))
        b, lb = run(chorusrun, pkg, np, peer, nbytes, iters)
        say("%s %s" % (name, lb))
        if a and b:
            say("RATIO %s chorus/%s %s %.3f (time ratio peer/chorus %.3f)" % (
                name, peer, metric, a[metric] / b[metric], b["seconds"] / a["seconds"]))
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "gpu_bench.txt"), "w") as f:
        f.write("\n".join(report) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
