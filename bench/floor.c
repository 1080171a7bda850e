/* The floor: a minimal tracer that traps one syscall (clock_gettime) with a
 * seccomp RET_TRACE filter and answers it by writing the timespec and
 * setting registers, nothing else. Usage: floor N  (runs bench/syscalls-like loop of N calls). */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    cpu_set_t set; CPU_ZERO(&set); CPU_SET(sched_getcpu(), &set);
    sched_setaffinity(0, sizeof set, &set);
    pid_t c = fork();
    if (c == 0) {
        ptrace(PTRACE_TRACEME, 0, 0, 0);
        raise(SIGSTOP);
        struct sock_filter f[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clock_gettime, 0, 1),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog p = {4, f};
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p);
        struct timespec ts;
        for (long i = 0; i < n; i++) syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
        _exit(0);
    }
    int st;
    waitpid(c, &st, 0);
    ptrace(PTRACE_SETOPTIONS, c, 0, PTRACE_O_TRACESECCOMP | PTRACE_O_EXITKILL);
    ptrace(PTRACE_CONT, c, 0, 0);
    long stops = 0;
    while (waitpid(c, &st, 0) == c && !WIFEXITED(st)) {
        if (st >> 8 == (SIGTRAP | (PTRACE_EVENT_SECCOMP << 8))) {
            struct user_regs_struct r;
            ptrace(PTRACE_GETREGS, c, 0, &r);
            /* Emulating clock_gettime includes writing its answer. */
            struct timespec v = {1, stops};
            struct iovec lo = {&v, sizeof v}, re = {(void *)r.rsi, sizeof v};
            process_vm_writev(c, &lo, 1, &re, 1, 0);
            r.orig_rax = -1;
            r.rax = 0;
            ptrace(PTRACE_SETREGS, c, 0, &r);
            stops++;
        }
        ptrace(PTRACE_CONT, c, 0, 0);
    }
    fprintf(stderr, "floor: %ld stops\n", stops);
    return 0;
}
