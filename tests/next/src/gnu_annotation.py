#!/usr/bin/env python3
"""Writes, on standard output, the assembly of a unit whose DWARF 5 carries
btf_decl_tag and btf_type_tag the way gcc 16 writes them: DW_TAG_GNU_annotation
DIEs at unit level, chained from the annotated DIE (struct, member, pointer,
function, parameter) through DW_AT_GNU_annotation, plus annotation children
where LLVM puts them. No compiler here (gcc 12) emits them.

    python3 tests/next/src/gnu_annotation.py > x.s && as -o x.o x.s
"""
import sys

DW_TAG = dict(compile_unit=0x11, base_type=0x24, structure_type=0x13, member=0x0d,
              pointer_type=0x0f, subprogram=0x2e, formal_parameter=0x05, gnu_annotation=0x6001,
              typedef=0x16, variable=0x34)
AT = dict(name=0x03, producer=0x25, language=0x13, byte_size=0x0b, encoding=0x3e, type=0x49,
          data_member_location=0x38, external=0x3f, low_pc=0x11, high_pc=0x12, prototyped=0x27,
          frame_base=0x40, location=0x02, const_value=0x1c, gnu_annotation=0x2139)
FORM = dict(string=0x08, data1=0x0b, data8=0x07, ref4=0x13, addr=0x01, flag_present=0x19, exprloc=0x18)

abbrevs = []  # (tag, children, [(at, form)])


def abbrev(tag, children, attrs):
    key = (tag, children, tuple(attrs))
    if key not in abbrevs:
        abbrevs.append(key)
    return abbrevs.index(key) + 1


out = []
info = []


def die(label, tag, children, attrs):
    """attrs: [(at, form, value)]"""
    code = abbrev(DW_TAG[tag], children, [(AT[a], FORM[f]) for a, f, _ in attrs])
    info.append(f'.L{label}:' if label else '')
    info.append(f'\t.uleb128 {code}')
    for a, f, v in attrs:
        if f == 'string':
            info.append(f'\t.string "{v}"')
        elif f == 'data1':
            info.append(f'\t.byte {v}')
        elif f == 'data8':
            info.append(f'\t.quad {v}')
        elif f == 'ref4':
            info.append(f'\t.long .L{v} - .Lcu')
        elif f == 'addr':
            info.append(f'\t.quad {v}')
        elif f == 'exprloc':
            info.append(f'\t.uleb128 {len(v)}')
            info.append('\t.byte ' + ', '.join(str(b) for b in v))
        elif f == 'flag_present':
            pass


def end():
    info.append('\t.byte 0')


def ann(label, kind, value, nxt=None):
    attrs = [('name', 'string', kind), ('const_value', 'string', value)]
    if nxt:
        attrs.append(('gnu_annotation', 'ref4', nxt))
    die(label, 'gnu_annotation', False, attrs)


die('cu_die', 'compile_unit', True, [('producer', 'string', 'GNU C17 16.1.0 -g -O2'),
                                   ('language', 'data1', 0x1d), ('name', 'string', 'gnu_annotation.c')])
die('int', 'base_type', False, [('byte_size', 'data1', 4), ('encoding', 'data1', 5), ('name', 'string', 'int')])
# struct s { int a __tag("m_a"); int __tag2 *p; } __tag("s1") __tag("s2");
die('s', 'structure_type', True, [('name', 'string', 's'), ('byte_size', 'data1', 16),
                                   ('gnu_annotation', 'ref4', 'ann_s1')])
die(None, 'member', False, [('name', 'string', 'a'), ('type', 'ref4', 'int'),
                            ('data_member_location', 'data1', 0), ('gnu_annotation', 'ref4', 'ann_m1')])
die(None, 'member', False, [('name', 'string', 'p'), ('type', 'ref4', 'ptr'),
                            ('data_member_location', 'data1', 8)])
# a child annotation of the struct, as LLVM places them
ann(None, 'btf_decl_tag', 's_child')
end()
# int __tag("t_inner") __tag("t_outer") *: the chain is in BTF order
die('ptr', 'pointer_type', False, [('byte_size', 'data1', 8), ('type', 'ref4', 'int'),
                                   ('gnu_annotation', 'ref4', 'ann_t1')])
die('plain', 'pointer_type', False, [('byte_size', 'data1', 8), ('type', 'ref4', 's')])
# int f(int x __tag("p_x"), int *q) __tag("f1") __tag("f2")
die('f', 'subprogram', True, [('external', 'flag_present', None), ('name', 'string', 'f'),
                              ('prototyped', 'flag_present', None), ('type', 'ref4', 'int'),
                              ('low_pc', 'addr', 'f'), ('high_pc', 'data8', 4),
                              ('frame_base', 'exprloc', [0x9c]), ('gnu_annotation', 'ref4', 'ann_f1')])
die(None, 'formal_parameter', False, [('name', 'string', 'x'), ('type', 'ref4', 'int'),
                                      ('location', 'exprloc', [0x55]), ('gnu_annotation', 'ref4', 'ann_p1')])
die(None, 'formal_parameter', False, [('name', 'string', 'q'), ('type', 'ref4', 'ptr'),
                                      ('location', 'exprloc', [0x54])])
ann(None, 'btf_decl_tag', 'f_child')
end()
# int g(struct s *v) __tag("g1"): a chain of one, parameter of another pointer
die('g', 'subprogram', True, [('external', 'flag_present', None), ('name', 'string', 'g'),
                              ('prototyped', 'flag_present', None), ('type', 'ref4', 'int'),
                              ('low_pc', 'addr', 'g'), ('high_pc', 'data8', 4),
                              ('frame_base', 'exprloc', [0x9c]), ('gnu_annotation', 'ref4', 'ann_g1')])
die(None, 'formal_parameter', False, [('name', 'string', 'v'), ('type', 'ref4', 'plain'),
                                      ('location', 'exprloc', [0x55])])
end()
# the annotation DIEs, siblings at unit level
ann('ann_s1', 'btf_decl_tag', 's1', 'ann_s2')
ann('ann_s2', 'btf_decl_tag', 's2')
ann('ann_m1', 'btf_decl_tag', 'm_a')
ann('ann_t1', 'btf_type_tag', 't_inner', 'ann_t2')
ann('ann_t2', 'btf_type_tag', 't_outer', 'ann_t3')
ann('ann_t3', 'btf_decl_tag', 'not_a_type_tag')
ann('ann_f1', 'btf_decl_tag', 'f1', 'ann_f2')
ann('ann_f2', 'btf_decl_tag', 'f2')
ann('ann_p1', 'btf_decl_tag', 'p_x')
ann('ann_g1', 'btf_decl_tag', 'g1')
end()

out.append('\t.text')
for fn in ['f', 'g']:
    out += [f'\t.globl {fn}', f'\t.type {fn}, @function', f'{fn}:', '\tmovl %edi, %eax', '\tret',
            f'\t.size {fn}, .-{fn}']
out.append('\t.section .debug_abbrev,"",@progbits')
out.append('.Labbrev:')
for i, (tag, children, attrs) in enumerate(abbrevs):
    out.append(f'\t.uleb128 {i + 1}')
    out.append(f'\t.uleb128 {tag:#x}')
    out.append(f'\t.byte {1 if children else 0}')
    for a, f in attrs:
        out.append(f'\t.uleb128 {a:#x}')
        out.append(f'\t.uleb128 {f:#x}')
    out.append('\t.byte 0, 0')
out.append('\t.byte 0')
out.append('\t.section .debug_info,"",@progbits')
out.append('.Lcu:')
out.append('\t.long .Lcu_end - .Lcu_start')
out.append('.Lcu_start:')
out.append('\t.value 5')
out.append('\t.byte 1')  # DW_UT_compile
out.append('\t.byte 8')
out.append('\t.long .Labbrev')
out += [l for l in info if l]
out.append('.Lcu_end:')
out.append('\t.section .note.GNU-stack,"",@progbits')
sys.stdout.write('\n'.join(out) + '\n')
