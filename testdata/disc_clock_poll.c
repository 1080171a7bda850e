/* disc_clock_poll: NOT a bug -- a poller on clock_gettime.
 * A poller thread calls clock_gettime(CLOCK_MONOTONIC) in a loop until a
 * flag is set; main sleeps 1 ms (usleep) and then sets the flag.  Prints
 * the number of clock_gettime calls the poller made, as the single stdout
 * line "calls=N", and exits 0. */
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;
static long calls;
static struct timespec last;

static void *poller(void *arg)
{
    (void)arg;
    long n = 0;
    while (!stop) {
        clock_gettime(CLOCK_MONOTONIC, &last);
        n++;
    }
    calls = n;
    return NULL;
}

int main(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, poller, NULL) != 0) {
        perror("pthread_create");
        return 2;
    }
    usleep(1000);
    stop = 1;
    pthread_join(t, NULL);
    printf("calls=%ld\n", calls);
    return 0;
}
