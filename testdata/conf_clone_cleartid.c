/* conf_clone_cleartid: pthread_join on many threads, which relies on the
 * kernel clearing the tid (CLONE_CHILD_CLEARTID) and futex-waking the joiner
 * at thread exit. Threads finish in arbitrary order and are joined in
 * forward, reverse and interleaved orders over several rounds (stacks get
 * reused); a join after the thread reported completion; a chain of threads
 * each creating and joining the next. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s (errno %d)\n", __FILE__, \
                    __LINE__, #c, errno);                                     \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

#define NTH 64
#define ROUNDS 5

static int done_flag[NTH];
static int notify_fd = -1;

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    unsigned long acc = 0;
    for (int i = 0; i < 200 * (id % 7 + 1); i++)
        acc = acc * 31 + i + id;
    __atomic_store_n(&done_flag[id], 1, __ATOMIC_SEQ_CST);
    if (notify_fd >= 0)
        CHECK(write(notify_fd, "x", 1) == 1);
    return (void *)(uintptr_t)(acc & 0xffff);
}

static void *chain(void *arg)
{
    intptr_t depth = (intptr_t)arg;
    if (depth == 0)
        return (void *)0;
    pthread_t next;
    void *ret;
    CHECK(pthread_create(&next, NULL, chain, (void *)(depth - 1)) == 0);
    CHECK(pthread_join(next, &ret) == 0);
    return (void *)((intptr_t)ret + depth);
}

int main(void)
{
    unsigned long grand = 0;
    for (int round = 0; round < ROUNDS; round++) {
        pthread_t th[NTH];
        for (int i = 0; i < NTH; i++) {
            done_flag[i] = 0;
            CHECK(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) == 0);
        }
        unsigned long sum = 0;
        int joined = 0;
        /* Round-dependent join order: forward, reverse, evens then odds. */
        for (int k = 0; k < NTH; k++) {
            int i;
            switch (round % 3) {
            case 0:
                i = k;
                break;
            case 1:
                i = NTH - 1 - k;
                break;
            default:
                i = k < NTH / 2 ? 2 * k : 2 * (k - NTH / 2) + 1;
                break;
            }
            void *ret;
            CHECK(pthread_join(th[i], &ret) == 0);
            CHECK(__atomic_load_n(&done_flag[i], __ATOMIC_SEQ_CST) == 1);
            sum += (uintptr_t)ret;
            joined++;
        }
        printf("round %d: joined %d threads, sum of results %lu\n", round, joined, sum);
        grand += sum;
    }
    printf("grand total %lu\n", grand);

    /* Join threads only after each reported completion through a pipe. */
    int p[2];
    CHECK(pipe(p) == 0);
    notify_fd = p[1];
    pthread_t th[8];
    for (int i = 0; i < 8; i++)
        CHECK(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) == 0);
    char buf[8];
    int got = 0;
    while (got < 8) {
        ssize_t n = read(p[0], buf, 8 - got);
        CHECK(n > 0);
        got += n;
    }
    unsigned long late = 0;
    for (int i = 7; i >= 0; i--) {
        void *ret;
        CHECK(pthread_join(th[i], &ret) == 0);
        late += (uintptr_t)ret;
    }
    notify_fd = -1;
    close(p[0]);
    close(p[1]);
    printf("late joins: sum %lu\n", late);

    pthread_t c;
    void *ret;
    CHECK(pthread_create(&c, NULL, chain, (void *)(intptr_t)30) == 0);
    CHECK(pthread_join(c, &ret) == 0);
    printf("chain of 30 nested threads: %ld\n", (long)(intptr_t)ret);
    return 0;
}
