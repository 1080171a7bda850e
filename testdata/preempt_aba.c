/* Preemption guest (instruction-level PCT): ABA on a lock-free stack.
 *
 * A Treiber stack of 8 preallocated nodes: pop reads the head and its next
 * pointer and swings the head with __atomic_compare_exchange_n; there is
 * no ABA protection (no tag, no hazard pointers).  Every pop validates
 * the node's checksum between reading the head and the compare-and-swap
 * (a debug check; it also widens the window).
 *
 *   thread B: 5000 times: pop a node, push it back;
 *   thread A: 2001 times: push back the node it kept from the previous
 *             round (if any), pop two nodes, push the first back and keep
 *             the second.  A still holds one node at the end.
 *
 * If B is preempted inside pop -- after reading head == X and X->next == Y,
 * before its compare-and-swap -- and A runs in between, A pops X, pops Y
 * and pushes X back: the head is X again, so B's compare-and-swap succeeds
 * and installs Y, which A holds.  The final check walks the stack (a cycle
 * cannot hang it) and accounts for every node exactly once across the
 * stack and the threads' hands; a node seen twice or lost is reported on
 * stderr with exit 1.
 *
 * detrun switches threads only at intercepted events and no pop or push
 * contains one, so under the default schedule, --chaos and plain --pct
 * each loop runs entirely before the other and the stack stays
 * consistent.  Each thread makes one intercepted, non-blocking syscall
 * (clock_gettime) right before its loop: an event at which a PCT change
 * point can start an instruction-level preemption.  main starts B first;
 * A first does some syscall-free busy work so that natively B's loop is
 * long over before A starts. */
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NODES 8
#define A_ROUNDS 2001
#define B_ROUNDS 5000

struct node {
    struct node *next;
    int id;
    long payload[4];
    long sum; /* checksum of the payload, validated by every pop */
};

static struct node nodes[NODES];
static struct node *head;
static struct node *a_hand; /* the node thread A keeps at the end */
static long empty_pops;
static volatile int bad_sums;

/* One intercepted syscall: the last event before the racy loop. */
static void mark(void)
{
    struct timespec ts;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
}

static void push(struct node *n)
{
    struct node *old = __atomic_load_n(&head, __ATOMIC_RELAXED);
    do
        n->next = old;
    while (!__atomic_compare_exchange_n(&head, &old, n, 1, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED));
}

/* A debug check of the node about to be popped (a few dozen
 * instructions, no syscall). */
static void check_node(const struct node *n)
{
    long s = 0;
    for (int i = 0; i < 4; i++)
        s = s * 31 + n->payload[i];
    if (s != n->sum)
        bad_sums++;
}

static struct node *pop(void)
{
    struct node *old = __atomic_load_n(&head, __ATOMIC_ACQUIRE);
    struct node *next;
    do {
        if (!old)
            return NULL;
        /* The window: between reading the head and the compare-and-swap,
         * old may be popped, its next popped too, and old pushed back. */
        next = old->next;
        check_node(old);
    } while (!__atomic_compare_exchange_n(&head, &old, next, 1, __ATOMIC_ACQUIRE,
                                          __ATOMIC_ACQUIRE));
    return old;
}

static void *thread_a(void *arg)
{
    (void)arg;
    struct node *kept = NULL;
    for (volatile int i = 0; i < 2000000; i++)
        ; /* natively: let thread B finish first */
    mark();
    for (int r = 0; r < A_ROUNDS; r++) {
        if (kept)
            push(kept);
        struct node *x = pop();
        struct node *y = pop();
        if (x)
            push(x);
        kept = y;
        if (!x || !y)
            __atomic_add_fetch(&empty_pops, 1, __ATOMIC_RELAXED);
    }
    a_hand = kept;
    return NULL;
}

static void *thread_b(void *arg)
{
    (void)arg;
    mark();
    for (int r = 0; r < B_ROUNDS; r++) {
        struct node *x = pop();
        if (x)
            push(x);
        else
            __atomic_add_fetch(&empty_pops, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

int main(void)
{
    for (int i = NODES - 1; i >= 0; i--) {
        nodes[i].id = i;
        nodes[i].sum = 0;
        for (int j = 0; j < 4; j++) {
            nodes[i].payload[j] = 1000 * i + j;
            nodes[i].sum = nodes[i].sum * 31 + nodes[i].payload[j];
        }
        push(&nodes[i]);
    }
    pthread_t a, b;
    if (pthread_create(&b, NULL, thread_b, NULL) != 0 ||
        pthread_create(&a, NULL, thread_a, NULL) != 0) {
        perror("pthread_create");
        return 2;
    }
    pthread_join(b, NULL);
    pthread_join(a, NULL);

    int seen[NODES] = {0};
    int on_stack = 0, problems = 0;
    struct node *n = head;
    for (; n && on_stack <= NODES; n = n->next, on_stack++)
        seen[n->id]++;
    if (n) {
        fprintf(stderr, "preempt_aba: cycle: the stack is longer than %d nodes\n", NODES);
        problems++;
    }
    if (a_hand)
        seen[a_hand->id]++;
    for (int i = 0; i < NODES; i++)
        if (seen[i] != 1) {
            fprintf(stderr, "preempt_aba: node %d %s\n", i,
                    seen[i] ? "seen twice (on the stack and in a thread's hand)" : "lost");
            problems++;
        }
    if (empty_pops) {
        fprintf(stderr, "preempt_aba: %ld pops found the stack empty\n", empty_pops);
        problems++;
    }
    if (bad_sums) {
        fprintf(stderr, "preempt_aba: %d nodes failed their checksum\n", bad_sums);
        problems++;
    }
    if (problems)
        return 1;
    printf("stack consistent: %d nodes on the stack, node %d in hand\n", on_stack,
           a_hand ? a_hand->id : -1);
    return 0;
}
