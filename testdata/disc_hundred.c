/* disc_hundred: one racy pair among 100 threads.
 * 100 workers each process their own input into their own slot (with a
 * per-slot mutex).  An input larger than the slot's capacity is rare --
 * exactly two of the 100 (threads 30 and 60) -- and the author appended
 * those to a shared overflow list without a lock: read nspill, store the
 * entry, write nspill + 1 (no syscall in between).  If the two overflowing
 * threads interleave there, an entry is lost: prints "BUG: overflow list
 * has N entries, expected 2" on stderr and exits 1.  Otherwise exits 0. */
#include <pthread.h>
#include <stdio.h>

#define NT 100
#define CAPACITY 98

struct slot {
    pthread_mutex_t lock;
    int size;
    unsigned sum;
    int overflowed;
};

static struct slot slots[NT];
static int spill[NT];
static int nspill;

static void *worker(void *arg)
{
    int id = (int)(long)arg;
    struct slot *s = &slots[id];
    int size = (id * 37) % 101; /* the input this worker got */
    unsigned h = 0;
    for (int i = 0; i < size; i++)
        h = h * 31 + (unsigned)(id ^ i);
    pthread_mutex_lock(&s->lock);
    s->size = size;
    s->sum = h;
    if (size > CAPACITY) {
        s->overflowed = 1;
        int k = nspill;
        spill[k] = id;
        nspill = k + 1;
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int main(void)
{
    pthread_t t[NT];
    for (int i = 0; i < NT; i++)
        pthread_mutex_init(&slots[i].lock, NULL);
    for (long i = 0; i < NT; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)i) != 0) {
            perror("pthread_create");
            return 2;
        }
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    int expected = 0;
    for (int i = 0; i < NT; i++)
        expected += slots[i].overflowed;
    if (nspill != expected) {
        fprintf(stderr, "BUG: overflow list has %d entries, expected %d\n", nspill, expected);
        return 1;
    }
    printf("ok %d slots, overflow list:", NT);
    for (int i = 0; i < nspill; i++)
        printf(" %d", spill[i]);
    printf("\n");
    return 0;
}
