/* ckpt_memory: a large touched heap before the checkpoint, little written
 * after it. Usage: ckpt_memory BIG_MB DIRTY_MB. Fills BIG_MB, sleeps 10 ms
 * of virtual time (the checkpoint goes there), then rewrites the first
 * DIRTY_MB and prints a checksum of everything. A branch's private memory
 * should be about DIRTY_MB, not BIG_MB: the rest stays shared with the
 * checkpoint (copy-on-write). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv)
{
    size_t big = (argc > 1 ? atol(argv[1]) : 64) << 20;
    size_t dirty = (argc > 2 ? atol(argv[2]) : 1) << 20;
    unsigned char *p = malloc(big);
    if (!p)
        return 2;
    for (size_t i = 0; i < big; i++)
        p[i] = (unsigned char)(i * 7);
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
    memset(p, 0x5a, dirty < big ? dirty : big);
    nanosleep(&ts, NULL);
    unsigned long sum = 0;
    for (size_t i = 0; i < big; i += 4096)
        sum += p[i];
    printf("sum %lu\n", sum);
    return 0;
}
