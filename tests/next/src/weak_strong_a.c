/* A weak definition of a hook, overridden at link time by the strong one in
 * weak_strong_b.c (the bpf_lsm_mmap_file case: the two differ only in a
 * parameter's name). The weak body stays in .text, unreferenced. */
struct file;
__attribute__((weak, noinline)) int hook_mmap(struct file *file, unsigned long prot)
{
	return prot == 0 && file != 0;
}
__attribute__((weak, noinline)) long hook_other(long a)
{
	return a + 1;
}
int main(int argc, char **argv)
{
	return hook_mmap((struct file *)argv, (unsigned long)argc) + (int)hook_other(argc);
}
