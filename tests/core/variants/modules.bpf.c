/* CO-RE relocations into module types of the corpus's 6.12 cloud kernel
 * (nf_conntrack, kvm-amd, btrfs) and into its vmlinux, for the minimal-BTF
 * test in tests/core_oracle.rs: what resolves against vmlinux + modules
 * must resolve the same against the one standalone minimal BTF. Build: see
 * build.sh beside this file. */
#define SEC(n) __attribute__((section(n), used))
#define PAI __attribute__((preserve_access_index))

struct kvm_vcpu {
	int cpu;
	int vcpu_id;
} PAI;

struct task_struct {
	int pid;
} PAI;

/* nf_conntrack.ko */
struct nf_conntrack_helper {
	char name[16];
	unsigned int queue_num;
	int (*help)(void *, unsigned int, void *, int);
} PAI;

/* kvm-amd.ko */
struct kvm_lapic {
	unsigned long base_address;
	struct kvm_vcpu *vcpu;
} PAI;

/* btrfs.ko */
struct btrfs_qgroup_limit {
	unsigned long long flags;
	unsigned long long max_excl;
} PAI;

enum btrfs_compression_type { BTRFS_COMPRESS_ZSTD = 3 };

/* nowhere */
struct not_in_any_kernel {
	int x;
} PAI;

char LICENSE[] SEC("license") = "GPL";

SEC("kprobe/helper")
int helper(struct nf_conntrack_helper *h)
{
	long r = h->queue_num;

	r += __builtin_preserve_field_info(h->name[3], 0 /* byte offset */);
	if (__builtin_preserve_field_info(h->help, 2 /* exists */))
		r += 1;
	r += __builtin_preserve_type_info(*h, 1 /* size */);
	return r;
}

SEC("kprobe/lapic")
int lapic(struct kvm_lapic *l)
{
	struct kvm_vcpu *v = l->vcpu;

	return v->vcpu_id + l->base_address;
}

SEC("kprobe/btrfs")
int btrfs(struct btrfs_qgroup_limit *q, struct task_struct *t, struct not_in_any_kernel *n)
{
	long r = q->max_excl + t->pid;

	r += __builtin_preserve_enum_value(*(typeof(enum btrfs_compression_type) *)BTRFS_COMPRESS_ZSTD, 1 /* value */);
	r += __builtin_preserve_type_info(*q, 0 /* exists */);
	if (__builtin_preserve_field_info(n->x, 2 /* exists */))
		r += n->x;
	return r;
}
