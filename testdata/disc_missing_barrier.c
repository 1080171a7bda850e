/* disc_missing_barrier: main trusts a "done" counter that is bumped too
 * early.  Each of four workers computes a partial sum (syscall-free),
 * reports itself done (an atomic add on tasks_done), and only then stores
 * the partial into its slot.  main waits (sched_yield) until tasks_done is
 * 4 -- instead of joining -- and adds up the slots.  If main sums while the
 * last worker is between its report and its store (a few instructions),
 * that partial is missing: prints "BUG: sum S, expected E" on stderr and
 * exits 1.  Otherwise exits 0. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

#define WORKERS 4
#define CHUNK 64

struct task {
    unsigned long lo, hi;
    unsigned long result, count;
};

static struct task tasks[WORKERS];
static int tasks_done;

static unsigned long f(unsigned long x)
{
    return (x * x) % 1009 + (x >> 2);
}

static void *worker(void *arg)
{
    struct task *t = arg;
    unsigned long s = 0;
    for (unsigned long x = t->lo; x < t->hi; x++)
        s += f(x);
    __sync_fetch_and_add(&tasks_done, 1);
    t->count = t->hi - t->lo;
    t->result = s;
    return NULL;
}

int main(void)
{
    unsigned long expected = 0;
    for (unsigned long x = 0; x < WORKERS * CHUNK; x++)
        expected += f(x);

    pthread_t th[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        tasks[i].lo = (unsigned long)i * CHUNK;
        tasks[i].hi = (unsigned long)(i + 1) * CHUNK;
        if (pthread_create(&th[i], NULL, worker, &tasks[i]) != 0) {
            perror("pthread_create");
            return 2;
        }
    }
    while (__atomic_load_n(&tasks_done, __ATOMIC_ACQUIRE) < WORKERS)
        sched_yield();

    unsigned long sum = 0, n = 0;
    for (int i = 0; i < WORKERS; i++) {
        sum += tasks[i].result;
        n += tasks[i].count;
    }
    if (sum != expected) {
        fprintf(stderr, "BUG: sum %lu, expected %lu (a worker had not stored its result)\n",
                sum, expected);
        return 1;
    }
    for (int i = 0; i < WORKERS; i++)
        pthread_join(th[i], NULL); /* cleanup only */
    printf("ok sum=%lu over %lu values\n", sum, n);
    return 0;
}
