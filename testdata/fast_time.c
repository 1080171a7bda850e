/* Time calls for the in-tracee fast path.
 *   fast_time loop N   N clock_gettime calls; prints the monotonic delta and
 *                      the realtime-monotonic offset seen by each interface
 *   fast_time alarm    spins on clock_gettime until SIGALRM (alarm(1))
 *   fast_time threads  4 threads each reading the clock 100000 times and
 *                      checking it never goes backwards
 *   fast_time rdtsc N  N reads of the TSC between clock reads: prints the TSC
 *                      delta and whether it is twice the monotonic clock */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

static long ns(struct timespec t) { return t.tv_sec * 1000000000L + t.tv_nsec; }

static volatile sig_atomic_t rang;
static void on_alarm(int s) { (void)s; rang = 1; }

static void *reader(void *arg) {
    long back = 0, prev = 0;
    for (int i = 0; i < 100000; i++) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (ns(t) < prev) back++;
        prev = ns(t);
    }
    *(long *)arg = back;
    return NULL;
}

/* One TSC read (noinline: one site, the compiler's usual 9 bytes). */
__attribute__((noinline)) static unsigned long long tsc(void) { return __rdtsc(); }

static int rdtsc_loop(long n) {
    struct timespec a, b;
    unsigned long long first = tsc(), prev = first, back = 0, outside = 0;
    for (long i = 0; i < n; i++) {
        clock_gettime(CLOCK_MONOTONIC, &a);
        unsigned long long t = tsc();
        clock_gettime(CLOCK_MONOTONIC, &b);
        if (t <= prev)
            back++;
        /* The virtual TSC runs at 2 GHz: twice the monotonic nanoseconds. */
        if (t / 2 < (unsigned long long)ns(a) || t / 2 > (unsigned long long)ns(b))
            outside++;
        prev = t;
    }
    printf("tsc delta %llu\nnot increasing %llu\noutside the clock %llu\n", prev - first, back, outside);
    return back || outside;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "loop";
    if (strcmp(mode, "rdtsc") == 0)
        return rdtsc_loop(argc > 2 ? atol(argv[2]) : 1000);
    if (strcmp(mode, "loop") == 0) {
        long n = argc > 2 ? atol(argv[2]) : 100000;
        struct timespec a, b, m, r, c;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (long i = 0; i < n; i++) clock_gettime(CLOCK_MONOTONIC, &b);
        clock_gettime(CLOCK_MONOTONIC, &m);
        clock_gettime(CLOCK_REALTIME, &r);
        clock_gettime(CLOCK_MONOTONIC_COARSE, &c);
        struct timeval tv;
        gettimeofday(&tv, NULL);
        time_t t = time(NULL);
        printf("delta %ld\n", ns(b) - ns(a));
        printf("realtime after monotonic: %d\n", ns(r) > ns(m));
        printf("coarse after realtime: %d\n", ns(c) > ns(m));
        printf("gettimeofday after realtime: %d\n",
               tv.tv_sec * 1000000L + tv.tv_usec >= ns(r) / 1000);
        printf("time agrees: %d\n", t == tv.tv_sec || t == tv.tv_sec + 1);
        printf("realtime %ld.%09ld\n", (long)r.tv_sec, r.tv_nsec);
        printf("offset %ld\n", ns(r) - ns(m));
    } else if (strcmp(mode, "alarm") == 0) {
        signal(SIGALRM, on_alarm);
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        alarm(1);
        long calls = 0;
        do {
            clock_gettime(CLOCK_MONOTONIC, &b);
            calls++;
        } while (!rang);
        long d = ns(b) - ns(a);
        printf("alarm after %ld calls, %s one second\n", calls, d >= 1000000000L ? "at least" : "less than");
    } else {
        pthread_t th[4];
        long back[4];
        for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, reader, &back[i]);
        for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
        printf("went backwards: %ld %ld %ld %ld\n", back[0], back[1], back[2], back[3]);
    }
    return 0;
}
