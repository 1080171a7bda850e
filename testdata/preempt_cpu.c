/* Preemption guest: one thread, CPU-bound, no syscalls for 50M iterations.
 *
 * With nobody to switch to, an instruction-level preemption point has
 * nothing to do: `detrun --pct --pct-insns N` must not single-step this
 * program at all (its summary reports 0 single-steps), whatever the seed.
 * Prints a checksum that is the same natively and under detrun. */
#include <stdio.h>

int main(void)
{
    unsigned long x = 0x9e3779b97f4a7c15UL;
    for (unsigned long i = 0; i < 50000000UL; i++) {
        x ^= x >> 29;
        x = x * 0xbf58476d1ce4e5b9UL + i;
    }
    printf("checksum %016lx\n", x);
    return 0;
}
