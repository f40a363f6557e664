/* Hand-made CO-RE relocations of every kind clang 14 emits, on types the
 * test (tests/core_oracle.rs) then changes in target BTF built with
 * btfkit's builder. Build: see build.sh beside this file. */
#define SEC(n) __attribute__((section(n), used))

struct thing {
	int a;
	int b;
	unsigned int flags : 3;
	unsigned int mode : 5;
	long ptr;
	char name[16];
} __attribute__((preserve_access_index));

enum color { RED = 1, GREEN = 2 };

struct other {
	int x;
} __attribute__((preserve_access_index));

struct other___v2 {
	int x;
	int y;
} __attribute__((preserve_access_index));

char LICENSE[] SEC("license") = "GPL";

SEC("tp/probe")
int probe(struct thing *t)
{
	long r = 0;

	if (__builtin_preserve_field_info(t->b, 2 /* exists */))
		r += t->b;
	r += __builtin_preserve_field_info(t->b, 0 /* byte offset */);
	r += __builtin_preserve_field_info(t->b, 1 /* byte size */);
	r += __builtin_preserve_field_info(t->mode, 3 /* signed */);
	r += __builtin_preserve_field_info(t->mode, 4 /* lshift */);
	r += __builtin_preserve_field_info(t->mode, 5 /* rshift */);
	r += __builtin_preserve_field_info(t->name[3], 0);
	r += t->ptr;
	r += __builtin_btf_type_id(*t, 0 /* local */);
	r += __builtin_btf_type_id(*t, 1 /* target */);
	r += __builtin_preserve_type_info(*t, 0 /* exists */);
	r += __builtin_preserve_type_info(*t, 1 /* size */);
	r += __builtin_preserve_enum_value(*(typeof(enum color) *)GREEN, 0 /* exists */);
	r += __builtin_preserve_enum_value(*(typeof(enum color) *)GREEN, 1 /* value */);
	return r;
}

SEC("tp/other")
int other(struct other___v2 *o)
{
	if (__builtin_preserve_field_info(o->y, 2))
		return o->y;
	return o->x;
}
