/* disc_lock_order: lock-order inversion.
 * Thread 1 transfers from account A to B (locks A, then B); thread 2
 * transfers from B to A (locks B, then A); three transfers each with short
 * critical sections, so the locks are almost never contended.  If each
 * thread takes its first lock before the other takes its second (the gap
 * between the two lock calls has no syscall), both block forever in
 * pthread_mutex_lock: the program hangs (detrun reports the deadlock and
 * exits 123).  Otherwise it prints the balances and exits 0. */
#include <pthread.h>
#include <stdio.h>

struct account {
    pthread_mutex_t lock;
    long balance;
};

static struct account acct_a = {PTHREAD_MUTEX_INITIALIZER, 1000};
static struct account acct_b = {PTHREAD_MUTEX_INITIALIZER, 1000};

static void transfer(struct account *from, struct account *to, long amount)
{
    pthread_mutex_lock(&from->lock);
    pthread_mutex_lock(&to->lock);
    from->balance -= amount;
    to->balance += amount;
    pthread_mutex_unlock(&to->lock);
    pthread_mutex_unlock(&from->lock);
}

static void *a_to_b(void *arg)
{
    (void)arg;
    for (int i = 0; i < 3; i++)
        transfer(&acct_a, &acct_b, 10 + i);
    return NULL;
}

static void *b_to_a(void *arg)
{
    (void)arg;
    for (int i = 0; i < 3; i++)
        transfer(&acct_b, &acct_a, 20 + i);
    return NULL;
}

int main(void)
{
    pthread_t t1, t2;
    if (pthread_create(&t1, NULL, a_to_b, NULL) != 0 ||
        pthread_create(&t2, NULL, b_to_a, NULL) != 0) {
        perror("pthread_create");
        return 2;
    }
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    if (acct_a.balance + acct_b.balance != 2000) {
        fprintf(stderr, "BUG: total %ld, expected 2000\n", acct_a.balance + acct_b.balance);
        return 1;
    }
    printf("ok a=%ld b=%ld\n", acct_a.balance, acct_b.balance);
    return 0;
}
