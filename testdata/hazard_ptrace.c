/* A tracee that tries to trace: detrun refuses (EPERM) and reports it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>

int main(void) {
    long r = ptrace(PTRACE_TRACEME, 0, 0, 0);
    printf("ptrace: %ld %s\n", r, r < 0 ? strerror(errno) : "ok");
    return 0;
}
