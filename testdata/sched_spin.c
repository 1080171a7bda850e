/* Scheduler guest: main spins on a flag with no syscalls in the loop while
 * a second thread sleeps 1 ms and sets it.  With one thread running at a
 * time this only terminates if the watchdog preempts the spinner. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static volatile int flag;

static void *setter(void *arg)
{
    (void)arg;
    usleep(1000);
    flag = 1;
    return NULL;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, setter, NULL);
    while (!flag)
        ; /* no syscalls here */
    pthread_join(t, NULL);
    puts("flag seen");
    return 0;
}
