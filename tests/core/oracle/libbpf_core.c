// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * libbpf_core: run libbpf's own CO-RE relocation on one BPF object against one
 * target BTF and print everything libbpf logs about it.  Oracle for
 * `btfkit core check`; see README.md in this directory.
 *
 * Usage: libbpf_core [--insns] [--keep-maps] OBJECT TARGET_BTF
 *
 * Written against libbpf's public API only (libbpf.h), for libbpf 1.1.
 *
 * What it does:
 *   1. Routes every libbpf message, at every level including debug, to stdout
 *      unchanged (libbpf's own "libbpf: " prefix is kept, nothing is added).
 *   2. Opens OBJECT with bpf_object__open_file(), passing TARGET_BTF as
 *      btf_custom_path (raw BTF or an ELF file with .BTF).
 *   3. Gives every program the type BPF_PROG_TYPE_UNSPEC.  libbpf then runs all
 *      CO-RE relocations and fails at the first program load with "missing BPF
 *      prog type", before it issues any BPF_PROG_LOAD.
 *   4. Unless --keep-maps is given, turns off automatic creation of every map
 *      (bpf_map__set_autocreate(map, false)), so that nothing the kernel says
 *      about maps can stop the load before relocation.  CO-RE relocation does
 *      not look at maps.
 *   5. Calls bpf_object__load().
 *   6. With --insns, prints the instructions of every program as libbpf holds
 *      them after the load attempt (patched by CO-RE), one line each:
 *        ORACLE-INSN <prog> <index> <code> <dst> <src> <off> <imm>
 *      in decimal, code as 0xNN.
 *   7. Prints "ORACLE-RESULT open=<e> load=<e>", where <e> is 0 or a negative
 *      errno value; load=none if the open failed.
 *
 * Exit status: 0 when the run happened (whatever libbpf said), 2 on bad usage
 * or unreadable input files.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

static int print_all(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	return vfprintf(stdout, fmt, ap);
}

static void usage(void)
{
	fprintf(stderr, "usage: libbpf_core [--insns] [--keep-maps] OBJECT TARGET_BTF\n");
}

static void dump_insns(struct bpf_object *obj)
{
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, obj) {
		const struct bpf_insn *insn = bpf_program__insns(prog);
		size_t n = bpf_program__insn_cnt(prog);
		const char *name = bpf_program__name(prog);
		size_t i;

		if (!insn)
			n = 0;
		for (i = 0; i < n; i++)
			printf("ORACLE-INSN %s %zu 0x%02x %u %u %d %d\n", name, i,
			       (unsigned int)insn[i].code,
			       (unsigned int)insn[i].dst_reg,
			       (unsigned int)insn[i].src_reg,
			       (int)insn[i].off, (int)insn[i].imm);
	}
}

int main(int argc, char **argv)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts);
	struct bpf_program *prog;
	struct bpf_object *obj;
	struct bpf_map *map;
	int want_insns = 0, keep_maps = 0;
	int open_err, load_err, argi = 1;

	while (argi < argc && argv[argi][0] == '-' && argv[argi][1] == '-') {
		if (!strcmp(argv[argi], "--insns")) {
			want_insns = 1;
		} else if (!strcmp(argv[argi], "--keep-maps")) {
			keep_maps = 1;
		} else if (!strcmp(argv[argi], "--")) {
			argi++;
			break;
		} else {
			usage();
			return 2;
		}
		argi++;
	}
	if (argc - argi != 2) {
		usage();
		return 2;
	}
	if (access(argv[argi], R_OK) || access(argv[argi + 1], R_OK)) {
		fprintf(stderr, "libbpf_core: cannot read %s: %s\n",
			access(argv[argi], R_OK) ? argv[argi] : argv[argi + 1],
			strerror(errno));
		return 2;
	}

	/* Line-buffered so libbpf's lines and ours interleave in call order
	 * even if someone adds stderr output later. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	libbpf_set_print(print_all);

	opts.btf_custom_path = argv[argi + 1];
	obj = bpf_object__open_file(argv[argi], &opts);
	if (!obj) {
		open_err = -errno;
		printf("ORACLE-RESULT open=%d load=none\n", open_err);
		return 0;
	}
	open_err = 0;

	bpf_object__for_each_program(prog, obj)
		bpf_program__set_type(prog, BPF_PROG_TYPE_UNSPEC);
	if (!keep_maps) {
		bpf_object__for_each_map(map, obj)
			bpf_map__set_autocreate(map, false);
	}

	load_err = bpf_object__load(obj);

	if (want_insns)
		dump_insns(obj);
	printf("ORACLE-RESULT open=%d load=%d\n", open_err, load_err);
	bpf_object__close(obj);
	return 0;
}
