#!/usr/bin/env python3
"""Memory under load: encodes synthetic inputs k times the vmlinux's DWARF
and shows how peak memory grows with the input.

The input for k is the vmlinux with its .debug_info replaced by k copies of
itself (`objcopy --update-section`). That is valid DWARF: CUs refer to
.debug_abbrev/.debug_str/.debug_line/.debug_loclists/.debug_rnglists by
absolute offsets, which every copy keeps, and to their own DIEs by
unit-relative offsets; the vmlinux is ET_EXEC, so there are no relocations
to repeat. Each input is encoded with `btfkit encode -j2 --stats --json`
under GNU time; the table gives input sizes, types before dedup, wall, CPU,
peak RSS and peak RSS per GB of input. The k>1 outputs are compared with the
k=1 output (reported, not a failure: the repeated CUs produce the same types
k times, which dedup should fold back).

  benches/mem-scale.py [--vmlinux PATH] [--k 1,2,4,8] [--btfkit PATH]
                       [--variants ",--collapse"] [--svg PLOT] [--work DIR]
                       [--max-load L] [--keep] [--pahole PATH]

--pahole runs that reference (`pahole -J -j2`, the same default features)
on each input after btfkit's variants, as a row of its own, compares its
output with btfkit's default one and prints btfkit's peak RSS over its.
With --vmlinux naming an LTO file (the corpus's ThinLTO kernel), each input
is read as one merged unit whose parts are the copies.

--variants lists the encode options to compare, comma-separated (an empty
entry is the default): each k is encoded once per variant, alternating,
and --svg plots wall time and peak RSS against k, a line per variant.

Waits (up to 10 minutes) for the 1-minute load average to drop below
--max-load before each run, and prints the load average each run saw.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import svgplot

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VMLINUX_CANDIDATES = [
    "/tmp/corpus/kernel/vmlinux-6.12.117+deb12-cloud-amd64",
    os.path.join(os.environ.get("BTFKIT_CACHE") or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "btfkit"),
                 "files/kernel/vmlinux-6.12.117+deb12-cloud-amd64"),
    os.path.join(ROOT, "target/corpus-cache/files/kernel/vmlinux-6.12.117+deb12-cloud-amd64"),
]


def section(elf, name):
    """(file offset, size) of section `name`."""
    out = subprocess.run(["readelf", "-SW", elf], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.replace("[ ", "[").split()
        if len(f) > 6 and f[1] == name:
            return int(f[4], 16), int(f[5], 16)
    raise SystemExit(f"{elf}: no section {name}")


def wait_for_quiet(max_load):
    t0 = time.time()
    while os.getloadavg()[0] > max_load and time.time() - t0 < 600:
        time.sleep(15)
    return os.getloadavg()


def build_input(vmlinux, k, work):
    if k == 1:
        return vmlinux
    off, size = section(vmlinux, ".debug_info")
    rep = os.path.join(work, f"debug_info.{k}")
    with open(vmlinux, "rb") as f, open(rep, "wb") as out:
        for _ in range(k):
            f.seek(off)
            left = size
            while left:
                chunk = f.read(min(left, 16 << 20))
                out.write(chunk)
                left -= len(chunk)
    path = os.path.join(work, f"vmlinux.x{k}")
    subprocess.run(["objcopy", f"--update-section=.debug_info={rep}", vmlinux, path], check=True)
    os.remove(rep)
    return path


def run(btfkit, elf, out, flags):
    tfile = out + ".time"
    p = subprocess.run(
        ["/usr/bin/time", "-v", "-o", tfile, btfkit, "encode", "-j2", "--stats", "--json", *flags, elf, "-o", out],
        capture_output=True,
        text=True,
    )
    if p.returncode != 0:
        raise SystemExit(f"encode of {elf} failed ({p.returncode}):\n{p.stderr}")
    stats = json.loads(p.stderr[p.stderr.index("{"):])
    t = {}
    for line in open(tfile):
        k, _, v = line.strip().rpartition(": ")
        t[k] = v
    wall = t["Elapsed (wall clock) time (h:mm:ss or m:ss)"].split(":")
    wall_s = sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall)))
    return {
        "types": stats["counts"]["types_before_dedup"],
        "types_after": stats["counts"]["types_after_dedup"],
        "collapsed": stats["counts"].get("types_collapsed", 0),
        "wall": wall_s,
        "cpu": float(t["User time (seconds)"]) + float(t["System time (seconds)"]),
        "rss": int(t["Maximum resident set size (kbytes)"]) * 1024,
        "heap": stats.get("peak_heap_bytes", 0),
    }


def run_pahole(pahole, elf, out):
    tfile = out + ".time"
    p = subprocess.run(["/usr/bin/time", "-v", "-o", tfile, pahole, "-J", "-j2", f"--btf_encode_detached={out}", elf],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"pahole on {elf} failed ({p.returncode}):\n{p.stderr}")
    t = {}
    for line in open(tfile):
        k, _, v = line.strip().rpartition(": ")
        t[k] = v
    wall = t["Elapsed (wall clock) time (h:mm:ss or m:ss)"].split(":")
    return {
        "types": "-",
        "types_after": "-",
        "collapsed": "-",
        "wall": sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall))),
        "cpu": float(t["User time (seconds)"]) + float(t["System time (seconds)"]),
        "rss": int(t["Maximum resident set size (kbytes)"]) * 1024,
        "heap": 0,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vmlinux", default=next((p for p in VMLINUX_CANDIDATES if os.path.exists(p)), None))
    ap.add_argument("--k", default="1,2,4,8")
    ap.add_argument("--variants", default="", help="encode options to compare, comma-separated ('' = default)")
    ap.add_argument("--svg", help="plot wall time and peak RSS against k")
    ap.add_argument("--btfkit", default=os.path.join(ROOT, "target/release/btfkit"))
    ap.add_argument("--work", default=os.path.join(ROOT, "target/bench-mem-scale"))
    ap.add_argument("--max-load", type=float, default=1.5)
    ap.add_argument("--keep", action="store_true", help="keep the synthetic inputs")
    ap.add_argument("--pahole", help="also run this reference pahole on each input")
    a = ap.parse_args()
    if not a.vmlinux:
        raise SystemExit("no vmlinux: pass --vmlinux (the corpus's, decompressed)")
    os.makedirs(a.work, exist_ok=True)
    ks = [int(x) for x in a.k.split(",")]
    variants = a.variants.split(",")
    rows = []
    outs = {}
    for k in ks:
        elf = build_input(a.vmlinux, k, a.work)
        load = wait_for_quiet(a.max_load)
        for v in variants:
            out = os.path.join(a.work, f"out.x{k}{v.replace(' ', '')}.btf")
            r = run(a.btfkit, elf, out, v.split())
            r.update(k=k, variant=v or "default", size=os.path.getsize(elf), info=section(elf, ".debug_info")[1],
                     load=load[0])
            rows.append(r)
            outs[(k, v)] = out
        if a.pahole:
            out = os.path.join(a.work, f"ref.x{k}.btf")
            r = run_pahole(a.pahole, elf, out)
            r.update(k=k, variant="pahole", size=os.path.getsize(elf), info=section(elf, ".debug_info")[1],
                     load=load[0])
            rows.append(r)
            outs[(k, "pahole")] = out
        if elf != a.vmlinux and not a.keep:
            os.remove(elf)
        print(f"k={k} done (load average {load[0]:.2f})", file=sys.stderr)

    gb = 1 << 30
    print(f"{'variant':>12} {'k':>2} {'input MB':>9} {'debug_info MB':>13} {'types pre-dedup':>15} {'collapsed':>9} {'after':>7} {'wall s':>7} {'CPU s':>7} "
          f"{'peak RSS MB':>11} {'RSS/GB input':>12} {'RSS/GB info':>11} {'load':>5}")
    for r in rows:
        print(f"{r['variant']:>12} {r['k']:>2} {r['size'] / 2**20:>9.0f} {r['info'] / 2**20:>13.0f} {r['types']:>15} {r['collapsed']:>9} {r['types_after']:>7} "
              f"{r['wall']:>7.1f} {r['cpu']:>7.1f} {r['rss'] / 2**20:>11.0f} {r['rss'] / (r['size'] / gb) / 2**20:>9.0f} MB "
              f"{r['rss'] / (r['info'] / gb) / 2**20:>8.0f} MB {r['load']:>5.2f}")
    for v in variants:
        mine = [r for r in rows if r["variant"] == (v or "default")]
        if (1, v) in outs:
            base = open(outs[(1, v)], "rb").read()
            for k in ks:
                if k != 1:
                    same = open(outs[(k, v)], "rb").read() == base
                    print(f"{v or 'default'}: output for k={k} {'equals' if same else 'differs from'} the k=1 output")
        for k in ks:
            if (k, v) in outs and (k, variants[0]) in outs and v != variants[0]:
                same = open(outs[(k, v)], "rb").read() == open(outs[(k, variants[0])], "rb").read()
                print(f"k={k}: {v} output {'equals' if same else 'DIFFERS from'} the {variants[0] or 'default'} output")
        if len(mine) > 1:
            a0, z = mine[0], mine[-1]
            print(f"{v or 'default'}: input grew {z['info'] / a0['info']:.2f}x (.debug_info), "
                  f"peak RSS {z['rss'] / a0['rss']:.2f}x, wall {z['wall'] / a0['wall']:.2f}x, CPU {z['cpu'] / a0['cpu']:.2f}x")
    if a.pahole:
        ours = {r["k"]: r for r in rows if r["variant"] == (variants[0] or "default")}
        theirs = {r["k"]: r for r in rows if r["variant"] == "pahole"}
        for k in ks:
            same = open(outs[(k, variants[0])], "rb").read() == open(outs[(k, "pahole")], "rb").read()
            print(f"k={k}: pahole's output {'equals' if same else 'DIFFERS from'} btfkit's; btfkit/pahole: "
                  f"peak RSS {ours[k]['rss'] / theirs[k]['rss']:.3f}, wall {ours[k]['wall'] / theirs[k]['wall']:.2f}")
    if a.svg:
        write_svg(a.svg, ks, variants, rows)
        print(f"plot: {a.svg}")


def write_svg(path, ks, variants, rows):
    """Two panels (wall seconds, peak RSS MiB) against k, a line per variant."""
    colors = ["#1f77b4", "#2ca02c", "#d62728", "#9467bd"]
    val = {(r["k"], r["variant"]): r for r in rows}
    series = []
    for i, v in enumerate(variants):
        n = v or "default"
        series.append((f"btfkit {n}", colors[i % 4],
                       {k: {"wall": val[(k, n)]["wall"], "rss": val[(k, n)]["rss"] / 2**20} for k in ks}))
    svgplot.two_panels(path, ks, series, [("wall", "wall time (s)"), ("rss", "peak RSS (MiB)")],
                       "copies of the DWARF (k)")


if __name__ == "__main__":
    main()
