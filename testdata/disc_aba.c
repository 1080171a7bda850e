/* disc_aba: ABA on a Treiber stack used as a buffer free list.
 * pop reads head and head->next, then swings head with a CAS; there is no
 * tag or counter.  Three threads each round take two buffers, compute into
 * the second, return the first and their previous result buffer, and keep
 * the second.  If a thread is stopped between reading next and its CAS (a
 * few instructions, no syscall) while others pop and push so that the same
 * node is on top again, the CAS succeeds with a stale next.  A buffer handed
 * out twice, an empty free list, or a free list without all 12 buffers at
 * the end: prints "BUG: ..." on stderr and exits 1.  Otherwise exits 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define NODES 12 /* each thread holds at most 3 */
#define THREADS 3
#define ROUNDS 100

struct node {
    struct node *volatile next;
    volatile int busy;
    int id;
    unsigned payload;
};

static struct node pool[NODES];
static struct node *volatile head;
static struct node *result[THREADS];

static struct node *pop(void)
{
    for (;;) {
        struct node *old = head;
        if (old == NULL)
            return NULL;
        struct node *next = old->next;
        if (__sync_bool_compare_and_swap(&head, old, next))
            return old;
    }
}

static void push(struct node *n)
{
    for (;;) {
        struct node *old = head;
        n->next = old;
        if (__sync_bool_compare_and_swap(&head, old, n))
            return;
    }
}

static struct node *get(int who)
{
    struct node *n = pop();
    if (n == NULL) {
        fprintf(stderr, "BUG: free list empty in thread %d\n", who);
        exit(1);
    }
    if (n->busy) {
        fprintf(stderr, "BUG: buffer %d handed to thread %d while thread %d uses it\n",
                n->id, who, n->busy - 1);
        exit(1);
    }
    n->busy = who + 1;
    return n;
}

static void put(struct node *n)
{
    if (n == NULL)
        return;
    n->busy = 0;
    push(n);
}

static void *worker(void *arg)
{
    int who = (int)(long)arg;
    struct node *cur = NULL;
    for (int r = 0; r < ROUNDS; r++) {
        struct node *scratch = get(who);
        struct node *out = get(who);
        scratch->payload = (unsigned)(who * 1000 + r);
        out->payload = (cur ? cur->payload : 0) * 2654435761u + scratch->payload;
        put(scratch);
        put(cur);
        cur = out;
    }
    result[who] = cur; /* main reads it and frees it */
    return NULL;
}

int main(void)
{
    for (int i = 0; i < NODES; i++) {
        pool[i].id = i;
        push(&pool[i]);
    }
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)i) != 0) {
            perror("pthread_create");
            return 2;
        }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < THREADS; i++)
        put(result[i]);
    int seen[NODES] = {0}, count = 0;
    for (struct node *n = head; n != NULL && count <= NODES; n = n->next, count++)
        if (seen[n->id]++) {
            fprintf(stderr, "BUG: buffer %d is on the free list twice\n", n->id);
            return 1;
        }
    if (count != NODES) {
        fprintf(stderr, "BUG: free list holds %d buffers, expected %d\n", count, NODES);
        return 1;
    }
    printf("ok %d buffers\n", count);
    return 0;
}
