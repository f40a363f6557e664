/* Functions whose signature clang >= 16 changes and marks DW_CC_nocall:
 * a dropped first parameter, a constant argument folded in, and a struct
 * of which only one member is passed (the true_signature cases). */
struct pair {
	long a;
	long b;
};

__attribute__((noinline)) static int use_second(struct pair p, int unused, int x)
{
	return (int)p.b + x;
}

__attribute__((noinline)) static int drop_first(int unused, int y)
{
	return y * 3;
}

__attribute__((noinline)) static long konst(long a, long b)
{
	return a + b;
}

int api(int v, long w)
{
	struct pair p = { v, w };

	return use_second(p, v, v + 1) + drop_first(v, v) + (int)konst(w, 7);
}
