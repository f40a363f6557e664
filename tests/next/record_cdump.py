#!/usr/bin/env python3
"""Records what bpftool of 2026 writes as C (`btf dump file X format c`,
sorted and `unsorted`) for the corpus's expected BTF and for the next
reference's output of its fixtures with `layout`: sha256 hashes in
tests/next/cdump.tsv, checked by tests/next_cdump.rs.

    python3 tests/next/record_cdump.py --bpftool PATH --pahole PATH [--corpus ../shared/corpus]

bpftool: v7.8.0, libbpf/bpftool 0ffb986 with its libbpf submodule at
34e3ebf0, built outside this repository with `make -C src`. pahole: the
next reference (see record.py). Rows: input (a corpus path, or next:CASE for
the reference's output of that tests/next/manifest.tsv case), base, style,
sha256 ("fails" when bpftool exits non-zero or crashes).
"""
import argparse, hashlib, os, subprocess, sys, tempfile

from record import resolver

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bpftool', required=True)
    ap.add_argument('--pahole', required=True)
    ap.add_argument('--corpus', default='../shared/corpus')
    ap.add_argument('--out', default='tests/next/cdump.tsv')
    a = ap.parse_args()
    corpus = os.path.abspath(a.corpus)
    work = tempfile.mkdtemp(prefix='btfkit-cdump-')
    resolve = resolver(corpus, os.getcwd())

    inputs = []  # (key, path, base rel, base path)
    for f in sorted(os.listdir(os.path.join(corpus, 'expected/fixtures'))):
        if f.endswith('.btf'):
            rel = 'expected/fixtures/' + f
            inputs.append((rel, resolve(rel), '-', None))
    for p in ['kernel', 'bare', 'default']:
        rel = 'expected/kernel/vmlinux.%s.btf' % p
        inputs.append((rel, resolve(rel), '-', None))
    for f in sorted(os.listdir(os.path.join(corpus, 'expected/modules'))):
        for p in ['kernel', 'bare']:
            if f.endswith('.%s.btf' % p):
                rel, base = 'expected/modules/' + f, 'expected/kernel/vmlinux.%s.btf' % p
                inputs.append((rel, resolve(rel), base, resolve(base)))
    with open('tests/next/manifest.tsv') as fh:
        hdr = fh.readline().rstrip('\n').split('\t')
        rows = [dict(zip(hdr, l.rstrip('\n').split('\t'))) for l in fh if l.strip()]
    for r in rows:
        if not r['case_id'].startswith('next-layout/fixture/'):
            continue
        out = os.path.join(work, r['case_id'].replace('/', '__') + '.btf')
        argv = [x.format(input=resolve(r['input']), output=out, base='') for x in r['args'].split(' ')]
        subprocess.run([a.pahole] + argv, capture_output=True)
        if os.path.exists(out) and os.path.getsize(out):
            inputs.append(('next:' + r['case_id'], out, '-', None))
    lines = []
    for key, path, base_rel, base in inputs:
        for style, extra in [('bpftool-7.8', []), ('bpftool-7.8-unsorted', ['unsorted'])]:
            cmd = [a.bpftool] + (['-B', base] if base else []) + ['btf', 'dump', 'file', path, 'format', 'c'] + extra
            p = subprocess.run(cmd, capture_output=True)
            sha = hashlib.sha256(p.stdout).hexdigest() if p.returncode == 0 else 'fails'
            lines.append('\t'.join([key, base_rel, style, sha]))
    with open(a.out, 'w') as fh:
        fh.write('input\tbase\tstyle\tsha256\n')
        fh.write('\n'.join(lines) + '\n')
    print('%d rows, %d where bpftool fails' % (len(lines), sum(l.endswith('fails') for l in lines)))

if __name__ == '__main__':
    sys.exit(main())
