#!/usr/bin/env python3
"""Whole-process benchmark: btfkit against a reference pahole, side by side.

Runs the same pahole-style command line through both encoders, alternating
them, for each thread count; records wall time, CPU time (user+sys), peak
RSS (from wait4's rusage) and peak anonymous memory (RssAnon of
/proc/PID/status, sampled every 10 ms: the heap, without the mapped input)
per run; prints a Markdown table of medians and the ratios, and writes an
SVG plot of time and RSS against threads.

    PAHOLE=/path/to/pahole benches/sweep.py --input vmlinux [--runs 5] \
        [--threads 1,2] [--btfkit target/release/btfkit] [--svg perf.svg]

The reference is whatever PAHOLE names (a pahole v1.31 built outside the
repo, or Debian's dwarves 1.24); the script prints its --version.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import svgplot

KERNEL_FLAGS = ("--btf_features=encode_force,var,float,enum64,decl_tag,type_tag,"
                "optimized_func,consistent_func,decl_tag_kfuncs,reproducible_build")


def sample_anon(pid, peak, done):
    """Largest RssAnon (KiB) of `pid` until `done` is set or it is gone."""
    path = f"/proc/{pid}/status"
    while not done.is_set():
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith("RssAnon:"):
                        peak[0] = max(peak[0], int(line.split()[1]))
                        break
        except OSError:
            return
        time.sleep(0.01)


def run_once(argv):
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak, done = [0], threading.Event()
    sampler = threading.Thread(target=sample_anon, args=(p.pid, peak, done))
    sampler.start()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"{' '.join(argv)}: exit {code}: {err.strip()}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0, peak[0] / 1024.0


def machine():
    """The CPU model and the CPUs this process may use: ratios against the
    reference move with the machine (session 11 found pahole gaining more
    from a second thread on one host than on another)."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {len(os.sched_getaffinity(0))} CPUs"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", required=True)
    ap.add_argument("--base", help="base BTF for split encoding (modules)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", default=f"1,2,{os.cpu_count()}")
    ap.add_argument("--btfkit", default="target/release/btfkit")
    ap.add_argument("--extra", default=KERNEL_FLAGS + " --lang_exclude=rust",
                    help="flags after -J -jN (default: the corpus 'kernel' profile)")
    ap.add_argument("--svg")
    ap.add_argument("--only", choices=["btfkit", "pahole"], help="run one encoder only")
    a = ap.parse_args()
    pahole = os.environ.get("PAHOLE")
    encoders = []
    if a.only != "pahole":
        encoders.append(("btfkit", [a.btfkit, "pahole"]))
    if a.only != "btfkit":
        if not pahole:
            sys.exit("set PAHOLE=/path/to/pahole (or pass --only btfkit)")
        ver = subprocess.run([pahole, "--version"], capture_output=True, text=True).stdout.strip()
        print(f"reference: {pahole} ({ver})")
        encoders.append(("pahole", [pahole]))
    threads = sorted({int(t) for t in a.threads.split(",")})
    out = tempfile.mkdtemp(prefix="btfkit-sweep-")
    res = {}
    for t in threads:
        for r in range(a.runs):
            for name, cmd in encoders:
                dst = os.path.join(out, f"{name}.btf")
                argv = cmd + ["-J", f"-j{t}"] + a.extra.split() + [f"--btf_encode_detached={dst}"]
                if a.base:
                    argv.append(f"--btf_base={a.base}")
                argv.append(a.input)
                res.setdefault((name, t), []).append(run_once(argv))
        if len(encoders) == 2:
            same = open(os.path.join(out, "btfkit.btf"), "rb").read() == open(os.path.join(out, "pahole.btf"), "rb").read()
            print(f"-j{t}: outputs {'identical' if same else 'DIFFER'}")
    med = {k: tuple(statistics.median(x[i] for x in v) for i in range(4)) for k, v in res.items()}
    print(f"\ninput: {a.input}; machine: {machine()}; median of {a.runs} runs, alternating encoders\n")
    print("| threads | encoder | wall s | CPU s | peak RSS MiB | peak anon MiB | wall vs ref | CPU vs ref | RSS vs ref | anon vs ref |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for t in threads:
        for name, _ in encoders:
            w, c, m, an = med[(name, t)]
            ratio = ""
            if name == "btfkit" and ("pahole", t) in med:
                pw, pc, pm, pa = med[("pahole", t)]
                ratio = f" {w / pw:.2f} | {c / pc:.2f} | {m / pm:.2f} | {an / pa:.2f} |"
            else:
                ratio = " | | | |"
            print(f"| {t} | {name} | {w:.2f} | {c:.2f} | {m:.0f} | {an:.0f} |{ratio}")
    if a.svg:
        write_svg(a.svg, threads, encoders, med)
        print(f"\nplot: {a.svg}")


def write_svg(path, threads, encoders, med):
    """Two panels (wall seconds, peak RSS MiB) against threads, one line per encoder."""
    colors = {"btfkit": "#1f77b4", "pahole": "#d62728"}
    series = [(n, colors[n], {t: {"wall": med[(n, t)][0], "rss": med[(n, t)][2]} for t in threads})
              for n, _ in encoders]
    svgplot.two_panels(path, threads, series, [("wall", "wall time (s)"), ("rss", "peak RSS (MiB)")], "threads")


if __name__ == "__main__":
    main()
