/* Race guest (hunt): check-then-act on a shared balance.
 *
 * Two threads each try to withdraw 100 from an account holding 100:
 *
 *     if (balance >= 100) { usleep(0); balance -= 100; }
 *
 * The usleep(0) (a clock_nanosleep syscall) sits inside the window between
 * the check and the act, so a scheduler that switches threads at syscalls
 * can let both threads pass the check: the balance goes to -100 and the
 * program exits 1 with a message on stderr.
 *
 * The second teller first looks the customer up (some syscall-free work,
 * then a usleep(0)), so every syscall the tellers make is a
 * clock_nanosleep.  Under detrun's default schedule (run a thread until it
 * blocks, round-robin in creation order, sleepers woken in deadline order)
 * the first teller's window closes before the second teller's check, so
 * the default run passes; natively the syscall-free work keeps the second
 * teller well behind the first.  Only interleavings in which one teller
 * checks inside the other's window (chaos seeds) overdraw. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static volatile long balance = 100;
static volatile long withdrawals;

static void lookup_customer(void)
{
    /* Syscall-free work: costs no scheduling events under detrun, but
     * natively keeps this teller well behind the first one. */
    for (volatile int i = 0; i < 1000000; i++)
        ;
    /* The lookup's one syscall; natively it also gives the first teller a
     * CPU back if this one took it. */
    usleep(0);
}

static void withdraw(long amount)
{
    if (balance >= amount) {
        usleep(0); /* syscall inside the check-then-act window */
        balance -= amount;
        withdrawals++;
    }
}

static void *teller(void *arg)
{
    long id = (long)arg;
    if (id == 1)
        lookup_customer();
    withdraw(100);
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
    if (balance < 0) {
        fprintf(stderr, "race_atomicity: overdrawn: balance %ld after %ld withdrawals\n",
                balance, withdrawals);
        return 1;
    }
    printf("balance %ld after %ld withdrawal(s)\n", balance, withdrawals);
    return 0;
}
