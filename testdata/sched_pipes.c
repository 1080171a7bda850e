/* Scheduler guest: 3 children share one pipe and each write 20 lines (one
 * write() per line, sched_yield() between writes); the parent prints what
 * it reads in the order read, then reaps the children in wait() order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHILDREN 3
#define LINES 20

int main(void)
{
    int fds[2];
    pid_t pids[CHILDREN];
    if (pipe(fds) != 0) {
        perror("pipe");
        return 1;
    }
    for (int k = 0; k < CHILDREN; k++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0) {
            close(fds[0]);
            for (int j = 0; j < LINES; j++) {
                char buf[64];
                int n = snprintf(buf, sizeof buf, "child %d line %d\n", k, j);
                if (write(fds[1], buf, n) != n)
                    _exit(2);
                sched_yield();
            }
            _exit(k);
        }
        pids[k] = pid;
    }
    close(fds[1]);
    char buf[4096];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0)
        fwrite(buf, 1, n, stdout);
    close(fds[0]);
    for (int i = 0; i < CHILDREN; i++) {
        int status;
        pid_t pid = wait(&status);
        int k = -1;
        for (int j = 0; j < CHILDREN; j++)
            if (pids[j] == pid)
                k = j;
        printf("reaped child %d status %d\n", k,
               WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }
    return 0;
}
