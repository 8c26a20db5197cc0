"""Runs both training benchmarks (bench/train) for one short round each and checks what they
print: every RESULT line they promise, with positive rates. Keeps the benchmark commands in the
README from rotting; it measures nothing.

    bench_smoke.py <repository root> <chorusrun>"""

import os
import re
import subprocess
import sys


def run(cmd):
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=150)
    if out.returncode != 0:
        sys.exit("%s failed (exit %d):\n%s" % (cmd[1], out.returncode, out.stdout))
    return out.stdout


def expect(out, pattern, what):
    found = re.findall(pattern, out, re.M)
    if not found:
        sys.exit("missing %s (pattern %r) in:\n%s" % (what, pattern, out))
    for v in found:
        if float(v) <= 0:
            sys.exit("%s is %s, not positive:\n%s" % (what, v, out))


def main():
    root, chorusrun = sys.argv[1], sys.argv[2]
    py = sys.executable
    out = run([py, os.path.join(root, "bench/train/bench_paired.py"), "--chorusrun", chorusrun, "--models", "cnn",
               "--rounds", "2", "--steps", "1", "--warm", "0", "--timeout", "120"])
    for impl, n in (("chorus", 2), ("ddp", 2), ("solo", 2), ("plain", 1)):
        expect(out, r"^RESULT train cnn %s %d (\S+)$" % (impl, n), "%s N=%d's samples/s" % (impl, n))
    for what in ("chorus/ddp", "chorus_scaling", "ddp_scaling", "solo_scaling"):
        expect(out, r"^RESULT paired cnn %s (\S+)$" % re.escape(what), "the paired " + what)
    out = run([py, os.path.join(root, "bench/train/bench_train.py"), "--chorusrun", chorusrun, "--models", "cnn",
               "--ranks", "2", "--impls", "chorus,chorus_fp16_overlap,chorus_nopri,ddp_chorus,ddp_gloo,solo",
               "--repeat", "1", "--steps", "2", "--warmup", "0", "--timeout", "120"])
    for impl in ("chorus", "chorus_fp16_overlap", "chorus_nopri", "ddp_chorus", "ddp_gloo", "solo"):
        expect(out, r"^RESULT train cnn %s 2 (\S+)$" % impl, "bench_train's %s N=2" % impl)
        expect(out, r"^RESULT train_hosts %s 2 cnn \S+ (\S+)$" % impl, "bench_train's %s scaling" % impl)
    # The BERT-base sized transformer, one sequence a rank, one step.
    out = run([py, os.path.join(root, "bench/train/bench_train.py"), "--chorusrun", chorusrun, "--models",
               "transformer", "--ranks", "2", "--impls", "chorus,solo", "--repeat", "1", "--steps", "1", "--warmup",
               "0", "--batch", "1", "--timeout", "120"])
    for impl in ("chorus", "solo"):
        expect(out, r"^RESULT train transformer %s 2 (\S+)$" % impl, "bench_train's transformer %s N=2" % impl)
    print("bench smoke: both training benchmarks printed their results")


if __name__ == "__main__":
    main()
