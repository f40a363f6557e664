#!/usr/bin/env python3
"""Check that libbpf_core logs cover every CO-RE relocation of their objects.

    check_logs.py OBJECTS_DIR LOG_DIR [LOG_DIR ...]

For each OBJECTS_DIR/X.bpf.o and each LOG_DIR/X.bpf.o.log (or LOG_DIR/X.log)
this reads the object's .BTF.ext core_relo subsection itself (independently of
libbpf) and checks that the log has, for every section with CO-RE records:

  * "sec 'S': found N CO-RE relocations" with the right N, and
  * for every record index i of that section exactly one outcome line:
    "relo #i: patched insn", "relo #i: substituting insn" (poison),
    "skipping CO-RE relocation #i" (eliminated weak subprogram),
    or a fatal "relo #i: failed ..." line (reported as a relocation error).

It prints one summary line per object and log directory, plus a table of the
notable things seen (poisoned insns, weak-subprogram skips, warnings).
Exit status 1 if any log misses relocation lines.
"""
import os
import re
import struct
import sys


def elf_sections(data):
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise ValueError("not an ELF64 file")
    end = "<" if data[5] == 1 else ">"
    (shoff,) = struct.unpack_from(end + "Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x3A)
    hdrs = []
    for i in range(shnum):
        name, typ, _flags, _addr, off, size = struct.unpack_from(
            end + "IIQQQQ", data, shoff + i * shentsize)
        hdrs.append((name, off, size))
    strtab_off = hdrs[shstrndx][1]
    out = {}
    for name, off, size in hdrs:
        nend = data.index(b"\0", strtab_off + name)
        out[data[strtab_off + name:nend].decode()] = data[off:off + size]
    return end, out


def core_relo_sections(path):
    """[(section name, record count)] from .BTF.ext, in file order."""
    with open(path, "rb") as f:
        data = f.read()
    end, secs = elf_sections(data)
    btf, ext = secs.get(".BTF"), secs.get(".BTF.ext")
    if btf is None or ext is None:
        return []
    _magic, _ver, _flags, bhdr = struct.unpack_from(end + "HBBI", btf, 0)
    _toff, _tlen, soff, slen = struct.unpack_from(end + "IIII", btf, 8)
    strs = btf[bhdr + soff:bhdr + soff + slen]

    def name(off):
        return strs[off:strs.index(b"\0", off)].decode()

    _magic, _ver, _flags, ehdr = struct.unpack_from(end + "HBBI", ext, 0)
    if ehdr < 32:
        return []
    core_off, core_len = struct.unpack_from(end + "II", ext, 24)
    if core_len == 0:
        return []
    p = ehdr + core_off
    stop = p + core_len
    (rec_size,) = struct.unpack_from(end + "I", ext, p)
    p += 4
    out = []
    while p < stop:
        sec_off, n = struct.unpack_from(end + "II", ext, p)
        p += 8 + n * rec_size
        out.append((name(sec_off), n))
    return out


FOUND = re.compile(r"^libbpf: sec '(.*)': found (\d+) CO-RE relocations$")
OUTCOME = re.compile(
    r"^libbpf: prog '[^']*': relo #(\d+): "
    r"(patched insn #\d+ \((?:ALU/ALU64|LDX/ST/STX|LDIMM64)\) (?:imm|off|imm64) "
    r"|substituting insn #\d+ w/ invalid insn$"
    r"|failed to )")
WEAK = re.compile(
    r"^libbpf: sec '(.*)': skipping CO-RE relocation #(\d+) for insn #\d+ "
    r"belonging to eliminated weak subprogram$")


def check(obj, log):
    expect = core_relo_sections(obj)
    lines = open(log, encoding="utf-8", errors="replace").read().splitlines()
    seen = {}  # section -> (N, {relo index: outcome kinds})
    cur = None
    notes = {"poison": 0, "weak-skip": 0, "no-match": 0, "failed": 0,
             "warn-memsz": 0}
    for ln in lines:
        m = FOUND.match(ln)
        if m:
            cur = m.group(1)
            seen[cur] = (int(m.group(2)), {})
            continue
        m = WEAK.match(ln)
        if m:
            sec = m.group(1)
            if sec in seen:
                seen[sec][1].setdefault(int(m.group(2)), set()).add("weak")
            notes["weak-skip"] += 1
            continue
        m = OUTCOME.match(ln)
        if m and cur is not None:
            what = m.group(2)
            kind = ("patch" if what.startswith("patched") else
                    "poison" if what.startswith("substituting") else "failed")
            seen[cur][1].setdefault(int(m.group(1)), set()).add(kind)
            if kind == "failed":
                notes["failed"] += 1
        if "w/ invalid insn" in ln:
            notes["poison"] += 1
        if ": no matching targets found" in ln:
            notes["no-match"] += 1
        if "accesses field incorrectly" in ln:
            notes["warn-memsz"] += 1
    problems = []
    total = 0
    for sec, n in expect:
        total += n
        if sec not in seen:
            problems.append(f"no 'found {n} CO-RE relocations' for '{sec}'")
            continue
        got_n, outs = seen[sec]
        if got_n != n:
            problems.append(f"'{sec}': log says {got_n}, .BTF.ext has {n}")
        missing = [i for i in range(n) if i not in outs]
        if missing:
            problems.append(f"'{sec}': no outcome for relo #{missing[0]}"
                            f" (+{len(missing) - 1} more)")
    result = lines[-1] if lines and lines[-1].startswith("ORACLE-RESULT") else "no ORACLE-RESULT line"
    return total, len(expect), problems, notes, result


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    objdir, logdirs = sys.argv[1], sys.argv[2:]
    bad = 0
    for logdir in logdirs:
        for fn in sorted(os.listdir(objdir)):
            if not fn.endswith(".bpf.o"):
                continue
            log = os.path.join(logdir, fn + ".log")
            if not os.path.exists(log):
                log = os.path.join(logdir, fn[:-len(".bpf.o")] + ".log")
            if not os.path.exists(log):
                print(f"{logdir}/{fn}: NO LOG")
                bad += 1
                continue
            total, nsec, problems, notes, result = check(os.path.join(objdir, fn), log)
            flags = " ".join(f"{k}={v}" for k, v in notes.items() if v)
            status = "OK " if not problems else "BAD"
            print(f"{status} {logdir}/{fn}: {total} relos in {nsec} sections; "
                  f"{result}{'; ' + flags if flags else ''}")
            for p in problems:
                print(f"    {p}")
            bad += bool(problems)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
