#!/usr/bin/env python3
"""A kernel package read as a stream against its unpacked tree: peak RSS and
wall time of `btfkit kernel` on each, alternating runs, medians, and whether
the two runs wrote the same bytes (issue 48, line 2: the package run's peak
within 1.1x the tree run's, its wall time no worse than before), then what
a rerun of the package costs.

    benches/package-memory.py PACKAGE.deb [--work DIR] [--runs 3] [--jobs 2]
        [--btfkit target/release/btfkit] [--before OLD_BTFKIT] [--xz-threads N]
        [--rerun | --rerun-only]

The tree is unpacked once into WORK/root (`dpkg-deb -x`). With --before, the
package run of an older binary alternates with the others, for the wall time
before the change; with --xz-threads, a package run decompressing on N
threads does too. With --rerun, the package's output is then run again:
whole (nothing to do), and with one module's output removed at 1 %, 50 %
and 99 % of the stream (each read up to there). Peak RSS and wall come from
GNU time (`%M`, `%e`).
"""

import argparse
import filecmp
import json
import os
import shutil
import statistics
import subprocess
import sys


def timed(cmd):
    """Runs `cmd` under GNU time: (wall seconds, peak RSS in MiB)."""
    out = subprocess.run(
        ["/usr/bin/time", "-f", "%e %M", *cmd],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    last = out.stderr.strip().splitlines()[-1]
    if out.returncode not in (0,):
        sys.exit(f"package-memory: {' '.join(cmd)} failed ({out.returncode}): {out.stderr[-2000:]}")
    wall, kb = last.split()
    return float(wall), int(kb) / 1024


def same_tree(a, b):
    """Whether directories `a` and `b` hold the same .btf files, byte for byte."""
    def btfs(d):
        return sorted(
            os.path.relpath(os.path.join(r, f), d) for r, _, fs in os.walk(d) for f in fs if f.endswith(".btf")
        )
    fa, fb = btfs(a), btfs(b)
    if fa != fb:
        return False
    return all(filecmp.cmp(os.path.join(a, f), os.path.join(b, f), shallow=False) for f in fa)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("deb")
    ap.add_argument("--work", default="/tmp/btfkit-package-bench")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--btfkit", default="target/release/btfkit")
    ap.add_argument("--before", help="an older btfkit whose package run is timed alongside")
    ap.add_argument("--xz-threads", type=int, help="also a package run decompressing on this many threads")
    ap.add_argument("--rerun", action="store_true", help="then time reruns of the package")
    ap.add_argument("--rerun-only", action="store_true", help="only the reruns, into WORK/package as it is")
    a = ap.parse_args()
    if a.rerun_only:
        rerun(a, os.path.join(a.work, "package"))
        return
    os.makedirs(a.work, exist_ok=True)
    root = os.path.join(a.work, "root")
    if not os.path.isdir(root):
        subprocess.run(["dpkg-deb", "-x", a.deb, root + ".tmp"], check=True)
        os.rename(root + ".tmp", root)
    runs = {"tree": [], "package": []}
    if a.before:
        runs["package, before"] = []
    xz = f"package, xz {a.xz_threads} threads"
    if a.xz_threads:
        runs[xz] = []
    for i in range(a.runs):
        for name in runs:
            out = os.path.join(a.work, name.replace(", ", "-").replace(" ", "-"))
            shutil.rmtree(out, ignore_errors=True)
            binary = a.before if name == "package, before" else a.btfkit
            src = root if name == "tree" else a.deb
            extra = [f"--xz-threads={a.xz_threads}"] if name == xz else []
            runs[name].append(timed([binary, "kernel", f"-j{a.jobs}", "-q", *extra, src, "--out-dir", out]))
            print(f"run {i + 1} {name}: {runs[name][-1][0]:.1f} s, {runs[name][-1][1]:.0f} MiB", flush=True)
    med = {n: (statistics.median(w for w, _ in r), statistics.median(m for _, m in r)) for n, r in runs.items()}
    print(f"\nmedians of {a.runs} alternating runs, -j{a.jobs}:")
    for n, (w, m) in med.items():
        print(f"  {n:<24} wall {w:7.1f} s   peak RSS {m:7.0f} MiB   / tree: {m / med['tree'][1]:.2f}")
    print(f"package / tree: peak RSS {med['package'][1] / med['tree'][1]:.2f}, wall {med['package'][0] / med['tree'][0]:.2f}")
    if a.before:
        print(f"package now / before: wall {med['package'][0] / med['package, before'][0]:.2f}, "
              f"peak RSS {med['package'][1] / med['package, before'][1]:.2f}")
    same = same_tree(os.path.join(a.work, "tree"), os.path.join(a.work, "package"))
    print(f"tree and package outputs: {'identical' if same else 'DIFFERENT'}")
    if a.rerun:
        rerun(a, os.path.join(a.work, "package"))
    sys.exit(0 if same else 1)


def rerun(a, out):
    """Reruns of the package into its finished output `out`."""
    report = os.path.join(out, "report.jsonl")
    with open(report) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    # the first run's lines come in the stream's order (two at a time)
    modules = [l["output"] for l in lines if l.get("kind") == "module" and l.get("output")]
    cmd = [a.btfkit, "kernel", f"-j{a.jobs}", "-q", a.deb, "--out-dir", out]
    wall, mib = timed(cmd)
    print(f"\nrerun, every line holding: {wall:.1f} s, {mib:.0f} MiB")
    for at in (0.01, 0.5, 0.99):
        gone = modules[int(at * (len(modules) - 1))]
        os.remove(os.path.join(out, gone))
        wall, mib = timed(cmd)
        print(f"rerun, {gone} removed ({at:.0%} of the stream): {wall:.1f} s, {mib:.0f} MiB")


if __name__ == "__main__":
    main()
