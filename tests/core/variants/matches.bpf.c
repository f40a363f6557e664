/* TYPE_MATCHES relocations (bpf_core_type_matches, kind 12; clang 15 or
 * later emits them) on the hand-made `struct thing` family of
 * variants.bpf.c and on real kernel types. tests/core_oracle.rs compares
 * btfkit's result with libbpf's on the hand-made variants and the real
 * kernels. Build: see build.sh beside this file. */
#define SEC(n) __attribute__((section(n), used))
#define MATCHES(T) __builtin_preserve_type_info(*(T *)0, 2 /* BPF_TYPE_MATCHES */)

struct thing {
	int a;
	int b;
	unsigned int flags : 3;
	unsigned int mode : 5;
	long ptr;
	char name[16];
};

/* fewer members than the kernel's: still a match */
struct thing___lite {
	long ptr;
	int a;
};

/* a member the kernel's does not have */
struct thing___extra {
	int a;
	int zz;
};

/* b unsigned and wider */
struct thing___wide {
	unsigned long b;
};

/* name too short */
struct thing___short {
	char name[8];
};

enum color { RED = 1, GREEN = 2 };
enum color___more { RED___m = 1, BLUE = 3 };
enum color___big { GREEN___b = 2 } __attribute__((packed, mode(DI)));

union thing_u {
	int a;
};

struct other {
	int x;
};

/* real kernel types */
struct list_head {
	struct list_head *next, *prev;
};
struct list_head___int {
	int *next;
};
struct task_struct {
	int pid;
	int tgid;
	struct list_head tasks;
};
struct task_struct___gone {
	int pid;
	long no_such_member_anywhere;
};
typedef unsigned int u32;
typedef unsigned long u32___wide;
enum bpf_map_type { BPF_MAP_TYPE_HASH = 1, BPF_MAP_TYPE_ARRAY = 2 };
enum bpf_map_type___made_up { BPF_MAP_TYPE_NOT_REAL = 999 };
typedef int (*bpf_callback_t)(unsigned long, unsigned long, unsigned long, unsigned long, unsigned long);
struct file_operations {
	long (*read)(void *, char *, unsigned long, long long *);
};
struct file_operations___bad {
	int (*read)(int);
};

char LICENSE[] SEC("license") = "GPL";

SEC("tp/matches")
int matches(void *ctx)
{
	long r = 0;

	r += MATCHES(struct thing);
	r += MATCHES(struct thing___lite);
	r += MATCHES(struct thing___extra);
	r += MATCHES(struct thing___wide);
	r += MATCHES(struct thing___short);
	r += MATCHES(enum color);
	r += MATCHES(enum color___more);
	r += MATCHES(enum color___big);
	r += MATCHES(union thing_u);
	r += MATCHES(struct other);
	r += MATCHES(struct list_head);
	r += MATCHES(struct list_head___int);
	r += MATCHES(struct task_struct);
	r += MATCHES(struct task_struct___gone);
	r += MATCHES(u32);
	r += MATCHES(u32___wide);
	r += MATCHES(enum bpf_map_type);
	r += MATCHES(enum bpf_map_type___made_up);
	r += MATCHES(bpf_callback_t);
	r += MATCHES(struct file_operations);
	r += MATCHES(struct file_operations___bad);
	return r;
}
