/* Syscalls given bad pointers fail with EFAULT (and nothing crashes):
 * the supervisor reads guest memory defensively. Output is the same
 * natively and under detrun. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>

#define BAD ((void *)8)

static void show(const char *what, long r) {
    printf("%-16s r=%ld errno=%s\n", what, r, r < 0 ? strerrorname_np(errno) : "-");
    fflush(stdout);
}

int main(void) {
    int p[2];
    if (pipe(p) != 0) return 1;
    show("clock_gettime", syscall(SYS_clock_gettime, CLOCK_REALTIME, BAD));
    show("gettimeofday", syscall(SYS_gettimeofday, BAD, NULL));
    show("nanosleep", syscall(SYS_nanosleep, BAD, NULL));
    show("clock_nanosleep", syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, BAD, NULL));
    show("getrandom", syscall(SYS_getrandom, BAD, 16, 0));
    show("futex_wait", syscall(SYS_futex, BAD, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0));
    show("poll", syscall(SYS_poll, BAD, 1, 0));
    show("select", syscall(SYS_select, 4, BAD, NULL, NULL, NULL));
    show("uname", syscall(SYS_uname, BAD));
    show("sysinfo", syscall(SYS_sysinfo, BAD));
    show("sched_getaff", syscall(SYS_sched_getaffinity, 0, 128, BAD));
    show("timer_create", syscall(SYS_timer_create, CLOCK_MONOTONIC, NULL, BAD));
    show("setitimer", syscall(SYS_setitimer, ITIMER_REAL, BAD, NULL));
    show("rt_sigsuspend", syscall(SYS_rt_sigsuspend, BAD, 8));
    if (write(p[1], "abcd", 4) != 4) return 1;
    show("read", syscall(SYS_read, p[0], BAD, 4));
    show("write", syscall(SYS_write, p[1], BAD, 4));
    struct iovec iov = {BAD, 100000};
    show("writev", syscall(SYS_writev, p[1], &iov, 1));
    show("writev_iov", syscall(SYS_writev, p[1], BAD, 1));
    pid_t c = fork();
    if (c == 0) _exit(7);
    show("wait4", syscall(SYS_wait4, c, BAD, 0, NULL));
    int st = 0;
    show("wait4_again", waitpid(c, &st, 0));
    printf("done\n");
    return 0;
}
