/* The strong definition of weak_strong_a.c's hook_mmap, which the linker
 * keeps. hook_other has no strong definition: the weak one is linked. */
struct file;
__attribute__((noinline)) int hook_mmap(struct file *file__nullable, unsigned long prot)
{
	return prot > 2 || file__nullable == 0;
}
