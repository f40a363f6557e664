#!/usr/bin/env python3
"""Records the `next` reference profile: the sha256 of what pahole at dwarves
1436daf (libbpf v1.8.0 as its lib/bpf) writes for every corpus case and for the
optimised inputs in tests/next/bin, into tests/next/manifest.tsv.

    python3 tests/next/record.py --pahole /path/to/dwarves-1436daf/build/pahole \
        [--corpus ../shared/corpus] [--workdir DIR] [--filter SUBSTR]

The reference is built outside this repository (`cmake -DCMAKE_BUILD_TYPE=Release
-D__LIB=lib` in a dwarves checkout at 1436daf with lib/bpf at libbpf dd92bef7);
nothing of it is kept here but these hashes.

Rows:
- `next/<case>`: every row of the corpus manifest, the same arguments (what a
  pipeline gets by swapping the binary);
- `next-layout/<case>` and `next-true_signature/<case>`: every detached
  kernel-profile row with `--btf_features=layout` (what kernel 7.1's
  scripts/Makefile.btf adds for pahole >= 1.31) or `--btf_features=true_signature`
  added;
- the same four profiles and two additions for tests/next/bin.
Every row is run twice; a row whose two runs differ is recorded as `unstable`.
"""
import argparse, hashlib, os, shutil, subprocess, sys, tempfile

PROFILES = {
    'kernel': '-J -j2 --btf_features=encode_force,var,float,enum64,decl_tag,type_tag,'
              'optimized_func,consistent_func,decl_tag_kfuncs,reproducible_build --lang_exclude=rust',
    'default': '-J -j2 --btf_features=+reproducible_build',
    'bare': '-J -j2',
    'all': '-J -j2 --btf_features=+reproducible_build,global_var,decl_tag_kfuncs,attributes,distilled_base',
}
ADDED = ['layout', 'true_signature']
HEADER = ['case_id', 'input', 'profile', 'mode', 'base', 'args', 'expected_sha256', 'exit_code']


def sha256(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for b in iter(lambda: f.read(1 << 20), b''):
            h.update(b)
    return h.hexdigest()


def resolver(corpus, repo):
    """A readable path for an input: a repository path (tests/...), a corpus
    file, or a compressed corpus file decompressed into btfkit's cache
    (where the tests find it)."""
    cache = os.path.join(os.environ.get('XDG_CACHE_HOME', os.path.expanduser('~/.cache')),
                         'btfkit', 'files')

    def resolve(rel):
        if rel.startswith('tests/'):
            return os.path.join(repo, rel)
        p = os.path.join(corpus, rel)
        if os.path.exists(p):
            return p
        q = os.path.join(cache, rel)
        if not os.path.exists(q):
            os.makedirs(os.path.dirname(q), exist_ok=True)
            subprocess.run(['zstd', '-q', '-d', '--long=27', '-o', q + '.tmp', p + '.zst'], check=True)
            os.rename(q + '.tmp', q)
        return q
    return resolve


def rows(corpus, repo):
    with open(os.path.join(corpus, 'manifest.tsv')) as fh:
        hdr = fh.readline().rstrip('\n').split('\t')
        base_rows = [dict(zip(hdr, l.rstrip('\n').split('\t'))) for l in fh if l.strip()]
    for r in sorted(os.listdir(os.path.join(repo, 'tests/next/bin'))):
        for p, flags in PROFILES.items():
            base_rows.append({'case_id': 'tests/%s/%s' % (r, p), 'input': 'tests/next/bin/' + r,
                              'profile': p, 'mode': 'detached', 'base': '-',
                              'args': flags + ' --btf_encode_detached={output} {input}'})
    out = []
    for r in base_rows:
        out.append(dict(r, case_id='next/' + r['case_id']))
    for r in base_rows:
        if r['profile'] != 'kernel' or r['mode'] != 'detached' or ' -j1 ' in r['args']:
            continue
        for feat in ADDED:
            args = r['args'].replace(' --lang_exclude=rust',
                                     ' --lang_exclude=rust --btf_features=' + feat, 1)
            assert args != r['args']
            out.append(dict(r, case_id='next-%s/%s' % (feat, r['case_id']),
                            profile='kernel+' + feat, args=args))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--pahole', required=True)
    ap.add_argument('--corpus', default='../shared/corpus')
    ap.add_argument('--workdir', default=None)
    ap.add_argument('--filter', default='')
    ap.add_argument('--out', default='tests/next/manifest.tsv')
    a = ap.parse_args()
    repo = os.getcwd()
    corpus = os.path.abspath(a.corpus)
    work = os.path.abspath(a.workdir or tempfile.mkdtemp(prefix='btfkit-next-'))
    resolve = resolver(corpus, repo)

    def run(r, n):
        safe = r['case_id'].replace('/', '__')
        inp = resolve(r['input'])
        base = resolve(r['base']) if r['base'] != '-' else ''
        out = os.path.join(work, '%s.%d.btf' % (safe, n))
        if os.path.exists(out):
            os.unlink(out)
        inplace = r['mode'].startswith('inplace:')
        if inplace:
            copy = os.path.join(work, '%s.%d.%s' % (safe, n, os.path.basename(r['input'])))
            shutil.copyfile(inp, copy)
            os.chmod(copy, 0o644)
            inp = copy
        argv = [x.format(input=inp, output=out, base=base) for x in r['args'].split(' ')]
        p = subprocess.run([a.pahole] + argv, capture_output=True)
        if inplace:
            sec = r['mode'].split(':', 1)[1]
            subprocess.run(['objcopy', '--dump-section', '%s=%s' % (sec, out), inp, inp + '.tmp'],
                           capture_output=True)
            os.unlink(inp)
            if os.path.exists(inp + '.tmp'):
                os.unlink(inp + '.tmp')
        got = sha256(out) if os.path.exists(out) and os.path.getsize(out) else '-'
        if os.path.exists(out):
            os.unlink(out)
        return got, p.returncode

    os.makedirs(work, exist_ok=True)
    done = []
    for r in rows(corpus, repo):
        if a.filter not in r['case_id']:
            continue
        first, rc = run(r, 1)
        second, rc2 = run(r, 2)
        r['expected_sha256'] = first if (first, rc) == (second, rc2) else 'unstable'
        r['exit_code'] = str(rc)
        done.append(r)
        print('%s\t%s\t%d' % (r['case_id'], r['expected_sha256'][:12], rc), flush=True)
    with open(a.out, 'w') as fh:
        fh.write('\t'.join(HEADER) + '\n')
        for r in done:
            fh.write('\t'.join(r[k] for k in HEADER) + '\n')
    print('%d rows, %d unstable' % (len(done), sum(r['expected_sha256'] == 'unstable' for r in done)))


if __name__ == '__main__':
    sys.exit(main())
