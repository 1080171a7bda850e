/* N trapped syscalls (clock_gettime through the raw syscall: detrun
 * emulates it), for the per-syscall cost. */
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    struct timespec ts;
    for (long i = 0; i < n; i++) syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
    return 0;
}
