/* disc_ws_deque: Chase-Lev work-stealing deque with the owner's fence
 * "optimized" away.  take() reads `top` before it publishes the
 * decremented `bottom` (textbook: store bottom, full fence, then load top).
 * With two items queued, a thief that steals both inside that window (a few
 * plain loads and stores, no syscall) leaves the owner with a stale top
 * that says "more than one item left", so the owner takes the last item
 * without the CAS, and the thief has it too.  The owner (main) pushes and
 * takes 200 items two at a time; one thief steals (yielding when it finds
 * nothing).  An item taken twice or never: prints "BUG: item I taken N
 * times" on stderr and exits 1.  Otherwise exits 0. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

#define ITEMS 200
#define EMPTY (-1)
#define ABORT (-2)

static volatile long top, bottom; /* no wrap-around: ITEMS fit in buf */
static volatile int buf[ITEMS];
static volatile int owner_done;
static int owner_got[ITEMS], thief_got[ITEMS];
static unsigned long work_sum[2];

static void push(int x)
{
    long b = bottom;
    buf[b] = x;
    bottom = b + 1;
}

static int take(void)
{
    long b = bottom - 1;
    long t = top;
    bottom = b;
    if (t > b) {
        bottom = b + 1;
        return EMPTY;
    }
    int x = buf[b];
    if (t == b) {
        if (!__sync_bool_compare_and_swap(&top, t, t + 1))
            x = EMPTY;
        bottom = b + 1;
    }
    return x;
}

static int steal(void)
{
    long t = top;
    long b = bottom;
    if (t >= b)
        return EMPTY;
    int x = buf[t];
    if (!__sync_bool_compare_and_swap(&top, t, t + 1))
        return ABORT;
    return x;
}

static unsigned long work(int x)
{
    unsigned long h = (unsigned long)x * 0x9e3779b97f4a7c15ul;
    return h ^ (h >> 29);
}

static void *thief(void *arg)
{
    (void)arg;
    while (!owner_done) {
        int x = steal();
        if (x >= 0) {
            thief_got[x]++;
            work_sum[1] += work(x);
        } else {
            sched_yield(); /* nothing to steal: back off */
        }
    }
    return NULL;
}

int main(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, thief, NULL) != 0) {
        perror("pthread_create");
        return 2;
    }
    for (int i = 0; i < ITEMS; i += 2) {
        push(i);
        push(i + 1);
        for (int k = 0; k < 2; k++) {
            int x = take();
            if (x >= 0) {
                owner_got[x]++;
                work_sum[0] += work(x);
            }
        }
    }
    owner_done = 1;
    pthread_join(t, NULL);
    int stolen = 0;
    for (int i = 0; i < ITEMS; i++) {
        int n = owner_got[i] + thief_got[i];
        stolen += thief_got[i];
        if (n != 1) {
            fprintf(stderr, "BUG: item %d taken %d times (owner %d, thief %d)\n",
                    i, n, owner_got[i], thief_got[i]);
            return 1;
        }
    }
    printf("ok %d items, %d stolen, sum %lx\n", ITEMS, stolen, work_sum[0] + work_sum[1]);
    return 0;
}
