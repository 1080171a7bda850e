/* disc_reorder: a two-field record updated without a lock.
 * Three writers each publish four generations into a shared record: first
 * `gen`, then (after computing it) `digest`, which must equal
 * digest_of(gen).  A checker thread samples the record.  Between the two
 * stores there is only a little arithmetic, no syscall.  A sample taken in
 * the window -- or two writers interleaving their stores so the record is
 * left mixed -- shows gen set but its digest missing: prints "BUG: record
 * gen G has digest D, expected E" on stderr and exits 1.  Otherwise 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define WRITERS 3
#define GENS 4
#define SAMPLES 20

struct record {
    volatile int gen;       /* 0: nothing published yet */
    volatile unsigned digest;
};

static struct record rec;

static unsigned digest_of(int gen)
{
    unsigned h = 2166136261u;
    for (int i = 0; i < 8; i++)
        h = (h ^ (unsigned)(gen + i)) * 16777619u;
    return h;
}

static void check(const char *who)
{
    int g = rec.gen;
    unsigned d = rec.digest;
    if (g != 0 && d != digest_of(g)) {
        fprintf(stderr, "BUG: %s: record gen %d has digest %08x, expected %08x\n",
                who, g, d, digest_of(g));
        exit(1);
    }
}

static void *writer(void *arg)
{
    int id = (int)(long)arg;
    for (int k = 1; k <= GENS; k++) {
        int g = id * 100 + k;
        rec.gen = g;
        unsigned d = digest_of(g);
        rec.digest = d;
    }
    return NULL;
}

static void *checker(void *arg)
{
    (void)arg;
    for (int i = 0; i < SAMPLES; i++)
        check("checker");
    return NULL;
}

int main(void)
{
    pthread_t t[WRITERS + 1];
    for (long i = 0; i <= WRITERS; i++)
        if (pthread_create(&t[i], NULL, i < WRITERS ? writer : checker,
                           (void *)(i + 1)) != 0) {
            perror("pthread_create");
            return 2;
        }
    for (int i = 0; i <= WRITERS; i++)
        pthread_join(t[i], NULL);
    check("main");
    printf("ok last gen %d\n", rec.gen);
    return 0;
}
