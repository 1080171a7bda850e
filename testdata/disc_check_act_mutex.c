/* disc_check_act_mutex: check-then-act split over two critical sections.
 * Two tellers each try three withdrawals of 30 from an account of 100.
 * withdraw() checks the balance under the mutex, unlocks, and then locks
 * again to debit it: the window between the two critical sections holds
 * only an uncontended unlock/lock (no syscall).  If the other teller drains
 * the account inside that window, the debit drives the balance below 0:
 * prints "BUG: balance ..." on stderr and exits 1.  Otherwise exits 0. */
#include <pthread.h>
#include <stdio.h>

#define START 100
#define AMOUNT 30
#define TRIES 3

static pthread_mutex_t account_lock = PTHREAD_MUTEX_INITIALIZER;
static int balance = START;
static int paid[2];

static int withdraw(int amount)
{
    pthread_mutex_lock(&account_lock);
    int enough = balance >= amount;
    pthread_mutex_unlock(&account_lock);
    if (!enough)
        return 0;
    pthread_mutex_lock(&account_lock);
    balance -= amount;
    pthread_mutex_unlock(&account_lock);
    return 1;
}

static void *teller(void *arg)
{
    long id = (long)arg;
    for (int i = 0; i < TRIES; i++)
        if (withdraw(AMOUNT))
            paid[id] += AMOUNT;
    return NULL;
}

int main(void)
{
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, teller, (void *)i) != 0) {
            perror("pthread_create");
            return 2;
        }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    if (balance < 0 || paid[0] + paid[1] + balance != START) {
        fprintf(stderr, "BUG: balance %d after paying out %d + %d\n",
                balance, paid[0], paid[1]);
        return 1;
    }
    printf("ok balance=%d\n", balance);
    return 0;
}
