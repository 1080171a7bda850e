/* disc_thread_start: order violation at thread creation.
 * main starts the indexer thread early "to overlap its startup" and then
 * sets up the global config.  The indexer waits (sched_yield) for the
 * config pointer and uses it at once -- but main publishes the pointer
 * before it fills in the bucket count.  The window is the few instructions
 * between the two stores in main; no syscall in it.  If the indexer reads
 * the config there it sees nbuckets == 0: prints "BUG: indexer saw the
 * config before it was complete" on stderr and exits 1.  Otherwise 0. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct config {
    const char *name;
    int nbuckets;
};

static struct config *volatile cfg; /* published by main */
static struct config the_config;
static int counts[64];

static void *indexer(void *arg)
{
    (void)arg;
    while (cfg == NULL)
        sched_yield();
    struct config *c = cfg;
    if (c->nbuckets == 0) {
        fprintf(stderr, "BUG: indexer saw the config before it was complete\n");
        exit(1);
    }
    for (unsigned key = 1; key <= 500; key++)
        counts[(key * 2654435761u >> 7) % c->nbuckets]++;
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t t;
    if (pthread_create(&t, NULL, indexer, NULL) != 0) {
        perror("pthread_create");
        return 2;
    }
    const char *name = argc > 1 ? argv[1] : "default";
    the_config.name = name;
    cfg = &the_config;
    the_config.nbuckets = 8 + (int)strlen(name);
    pthread_join(t, NULL);
    int total = 0;
    for (int i = 0; i < cfg->nbuckets; i++)
        total += counts[i];
    if (total != 500) {
        fprintf(stderr, "BUG: indexed %d keys, expected 500\n", total);
        return 1;
    }
    printf("ok %s: %d buckets\n", cfg->name, cfg->nbuckets);
    return 0;
}
