/* nondet.c - print every commonly observable source of nondeterminism.
 *
 * Output: one "key: value" line per observation, then "threads: ok" and
 * "done".  Natively most values vary run to run; under detrun they must
 * be identical across runs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

static void print_hex(const char *key, const unsigned char *buf, size_t n)
{
    printf("%s: ", key);
    for (size_t i = 0; i < n; i++)
        printf("%02x", buf[i]);
    printf("\n");
}

static void print_clock(const char *key, clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) {
        printf("%s: error %s\n", key, strerror(errno));
        return;
    }
    printf("%s: %lld.%09ld\n", key, (long long)ts.tv_sec, ts.tv_nsec);
}

static void read_dev(const char *key, const char *path)
{
    unsigned char buf[16];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        printf("%s: error %s\n", key, strerror(errno));
        return;
    }
    size_t got = 0;
    while (got < sizeof buf) {
        ssize_t r = read(fd, buf + got, sizeof buf - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (got != sizeof buf) {
        printf("%s: short read %zu\n", key, got);
        return;
    }
    print_hex(key, buf, sizeof buf);
}

static inline uint64_t do_rdtsc(void)
{
    uint32_t lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}

static inline uint64_t do_rdtscp(uint32_t *aux)
{
    uint32_t lo, hi, c;
    __asm__ __volatile__("rdtscp" : "=a"(lo), "=d"(hi), "=c"(c));
    *aux = c;
    return ((uint64_t)hi << 32) | lo;
}

static inline void do_cpuid(uint32_t leaf, uint32_t subleaf, uint32_t *a,
                            uint32_t *b, uint32_t *c, uint32_t *d)
{
    __asm__ __volatile__("cpuid"
                         : "=a"(*a), "=b"(*b), "=c"(*c), "=d"(*d)
                         : "a"(leaf), "c"(subleaf));
}

static void *thread_fn(void *arg)
{
    return (void *)((uintptr_t)arg * 2 + 1);
}

int main(void)
{
    /* clocks */
    print_clock("clock_realtime", CLOCK_REALTIME);
    print_clock("clock_monotonic", CLOCK_MONOTONIC);
    print_clock("clock_boottime", CLOCK_BOOTTIME);
    print_clock("clock_monotonic_raw", CLOCK_MONOTONIC_RAW);
    print_clock("clock_realtime_coarse", CLOCK_REALTIME_COARSE);
    print_clock("clock_process_cputime_id", CLOCK_PROCESS_CPUTIME_ID);
    print_clock("clock_thread_cputime_id", CLOCK_THREAD_CPUTIME_ID);

    struct timespec res;
    if (clock_getres(CLOCK_MONOTONIC, &res) == 0)
        printf("clock_getres_monotonic: %lld.%09ld\n", (long long)res.tv_sec,
               res.tv_nsec);
    else
        printf("clock_getres_monotonic: error %s\n", strerror(errno));

    struct timeval tv;
    gettimeofday(&tv, NULL);
    printf("gettimeofday: %lld.%06ld\n", (long long)tv.tv_sec, (long)tv.tv_usec);
    printf("time: %lld\n", (long long)time(NULL));

    /* TSC */
    printf("rdtsc: %llu\n", (unsigned long long)do_rdtsc());
    uint32_t aux = 0;
    uint64_t tscp = do_rdtscp(&aux);
    printf("rdtscp: %llu\n", (unsigned long long)tscp);
    printf("rdtscp_aux: %u\n", aux);
    uint64_t t1 = do_rdtsc();
    uint64_t t2 = do_rdtsc();
    printf("rdtsc_increasing: %s\n", t2 > t1 ? "yes" : "no");

    /* randomness */
    unsigned char rnd[16];
    ssize_t gr = getrandom(rnd, sizeof rnd, 0);
    if (gr == (ssize_t)sizeof rnd)
        print_hex("getrandom", rnd, sizeof rnd);
    else
        printf("getrandom: error %s\n", strerror(errno));
    read_dev("dev_urandom", "/dev/urandom");
    read_dev("dev_random", "/dev/random");
    const unsigned char *atr = (const unsigned char *)getauxval(AT_RANDOM);
    if (atr)
        print_hex("at_random", atr, 16);
    else
        printf("at_random: missing\n");

    /* addresses */
    void *small = malloc(64);
    void *big = malloc(1 << 20);
    int stackvar = 0;
    printf("malloc_64: %p\n", small);
    printf("malloc_1m: %p\n", big);
    printf("stack_var: %p\n", (void *)&stackvar);
    printf("libc_printf: %p\n", (void *)&printf);
    printf("main: %p\n", (void *)&main);
    free(small);
    free(big);

    /* process identity */
    printf("getpid: %d\n", (int)getpid());
    printf("getppid: %d\n", (int)getppid());
    printf("gettid: %ld\n", (long)syscall(SYS_gettid));

    char host[256];
    if (gethostname(host, sizeof host) == 0) {
        host[sizeof host - 1] = '\0';
        printf("hostname: %s\n", host);
    } else {
        printf("hostname: error %s\n", strerror(errno));
    }
    struct utsname u;
    if (uname(&u) == 0) {
        printf("uname_sysname: %s\n", u.sysname);
        printf("uname_nodename: %s\n", u.nodename);
        printf("uname_release: %s\n", u.release);
        printf("uname_version: %s\n", u.version);
        printf("uname_machine: %s\n", u.machine);
    } else {
        printf("uname: error %s\n", strerror(errno));
    }

    /* CPUs */
    printf("nprocessors_onln: %ld\n", sysconf(_SC_NPROCESSORS_ONLN));
    printf("nprocessors_conf: %ld\n", sysconf(_SC_NPROCESSORS_CONF));
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        printf("affinity_count: %d\n", CPU_COUNT(&set));
    else
        printf("affinity_count: error %s\n", strerror(errno));
    printf("sched_getcpu: %d\n", sched_getcpu());

    /* CPUID */
    uint32_t a, b, c, d;
    do_cpuid(0, 0, &a, &b, &c, &d);
    char vendor[13];
    memcpy(vendor + 0, &b, 4);
    memcpy(vendor + 4, &d, 4);
    memcpy(vendor + 8, &c, 4);
    vendor[12] = '\0';
    uint32_t maxleaf = a;
    printf("cpuid_vendor: %s\n", vendor);
    do_cpuid(1, 0, &a, &b, &c, &d);
    printf("cpuid_leaf1_eax: 0x%08x\n", a);
    printf("cpuid_rdrand: %u\n", (c >> 30) & 1);
    if (maxleaf >= 7) {
        do_cpuid(7, 0, &a, &b, &c, &d);
        printf("cpuid_rdseed: %u\n", (b >> 18) & 1);
    } else {
        printf("cpuid_rdseed: 0\n");
    }

    /* threads */
    pthread_t th[2];
    int ok = 1;
    for (uintptr_t i = 0; i < 2; i++) {
        if (pthread_create(&th[i], NULL, thread_fn, (void *)i) != 0) {
            ok = 0;
            th[i] = 0;
        }
    }
    for (uintptr_t i = 0; i < 2; i++) {
        void *ret = NULL;
        if (ok && pthread_join(th[i], &ret) == 0) {
            if ((uintptr_t)ret != i * 2 + 1)
                ok = 0;
        } else {
            ok = 0;
        }
    }
    printf("threads: %s\n", ok ? "ok" : "FAILED");
    printf("done\n");
    return ok ? 0 : 1;
}
