/* disc_check_act_getppid: check-then-act on a plain shared balance.
 * Two tellers each try three withdrawals of 30 from an account of 100, with
 * no lock at all.  Between the check (balance >= amount) and the debit the
 * teller writes an audit record that includes getppid() -- a real syscall,
 * but one detrun lets through without a stop, so the window holds no
 * scheduling point.  If the other teller drains the account inside the
 * window the balance goes below 0 (or a debit is lost): prints "BUG: ..."
 * on stderr and exits 1.  Otherwise exits 0. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#define START 100
#define AMOUNT 30
#define TRIES 3

struct audit {
    pid_t ppid;
    int teller;
    int amount;
};

static int balance = START;
static struct audit audit_log[2][TRIES];
static int paid[2];

static int withdraw(int teller, int n, int amount)
{
    if (balance < amount)
        return 0;
    struct audit *a = &audit_log[teller][n];
    a->ppid = getppid();
    a->teller = teller;
    a->amount = amount;
    balance -= amount;
    return 1;
}

static void *teller(void *arg)
{
    int id = (int)(long)arg;
    for (int i = 0; i < TRIES; i++)
        if (withdraw(id, i, AMOUNT))
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
    int audited = 0;
    for (int i = 0; i < 2; i++)
        for (int n = 0; n < TRIES; n++)
            if (audit_log[i][n].ppid == getppid())
                audited += audit_log[i][n].amount;
    if (balance < 0 || paid[0] + paid[1] + balance != START || audited != paid[0] + paid[1]) {
        fprintf(stderr, "BUG: balance %d after paying out %d + %d\n",
                balance, paid[0], paid[1]);
        return 1;
    }
    printf("ok balance=%d\n", balance);
    return 0;
}
