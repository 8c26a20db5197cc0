#!/usr/bin/python3
"""Plots an autotune log (CHORUS_AUTOTUNE_LOG, one CSV row per sample) as a PNG.

Top: each sample's score (GB/s of gradients reduced, the median of its windows), by phase
(searching / watching), with the best so far in each search (a dashed line marks a new search,
started when the score dropped). Below: the tunables each sample measured.
  /usr/bin/python3 scripts/plot_autotune.py LOG.csv OUT.png [--title TEXT]
Needs matplotlib (Debian: python3-matplotlib).
"""
import argparse
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_rows(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"plot_autotune: {path} has no sample rows")
    need = {"sample", "phase", "streams", "chunk_bytes", "fusion_threshold", "cycle_time_ms", "in_place_bytes",
            "score_bytes_per_s"}
    missing = need - set(rows[0])
    if missing:
        sys.exit(f"plot_autotune: {path} lacks columns {sorted(missing)}")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("png")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    rows = read_rows(a.log)
    x = [int(r["sample"]) for r in rows]
    score = [float(r["score_bytes_per_s"]) / 1e9 for r in rows]
    search = [int(r.get("search", 0) or 0) for r in rows]
    # The best so far within each search: a new search starts when the network changed.
    best, best_so_far = 0.0, []
    for i, s in enumerate(score):
        if i and search[i] != search[i - 1]:
            best = 0.0
        best = max(best, s)
        best_so_far.append(best)

    knobs = [("streams", "streams", 1, False), ("chunk_bytes", "chunk (MiB)", 1 / 2**20, True),
             ("fusion_threshold", "fusion (MiB)", 1 / 2**20, True), ("cycle_time_ms", "cycle (ms)", 1, True),
             ("in_place_bytes", "in-place (MiB)", 1 / 2**20, True)]
    fig, axes = plt.subplots(1 + len(knobs), 1, figsize=(8, 9), sharex=True,
                             gridspec_kw={"height_ratios": [3] + [1] * len(knobs)})
    top = axes[0]
    for phase, colour, label in (("search", "tab:blue", "searching"), ("watch", "tab:green", "watching")):
        px = [xi for xi, r in zip(x, rows) if r["phase"] == phase]
        py = [si for si, r in zip(score, rows) if r["phase"] == phase]
        if px:
            top.scatter(px, py, s=18, color=colour, label=label, zorder=3)
    for i in range(1, len(rows)):
        if search[i] != search[i - 1]:
            for ax in axes:
                ax.axvline(x[i] - 0.5, color="tab:red", linestyle="--", linewidth=1)
            top.annotate(f"search {search[i]}", (x[i] - 0.5, top.get_ylim()[1]), fontsize=8, color="tab:red",
                         ha="left", va="top")
    top.plot(x, best_so_far, color="tab:orange", label="best so far (this search)")
    top.set_ylabel("score (GB/s)")
    top.grid(alpha=0.3)
    top.legend(loc="lower right")
    top.set_title(a.title or f"autotune log {a.log}")
    for ax, (col, label, scale, log) in zip(axes[1:], knobs):
        ax.step(x, [float(r[col]) * scale for r in rows], where="post", color="tab:gray")
        ax.set_ylabel(label, fontsize=8)
        if log:
            ax.set_yscale("log", base=2)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("sample")
    fig.tight_layout()
    fig.savefig(a.png, dpi=100)


if __name__ == "__main__":
    main()
