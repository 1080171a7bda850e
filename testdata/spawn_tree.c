/* spawn_tree.c - fork 3 children that report through a pipe, reap them,
 * then vfork+exec /bin/echo.
 *
 * Output:
 *   child K pid=P          (3 lines, in pipe read order; K = 1..3)
 *   wait: pid=P status=S   (3 lines, in wait() return order; S = exit code)
 *   vforked                (from /bin/echo)
 *   vfork: pid=P status=0
 *   spawn_tree: done
 * Natively the order and PIDs vary; under detrun they must be deterministic.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char *what)
{
    fprintf(stderr, "%s failed: %s\n", what, strerror(errno));
    exit(1);
}

int main(void)
{
    int fds[2];
    if (pipe(fds) != 0)
        die("pipe");

    fflush(stdout);
    for (int k = 1; k <= 3; k++) {
        pid_t pid = fork();
        if (pid < 0)
            die("fork");
        if (pid == 0) {
            close(fds[0]);
            char line[64];
            int n = snprintf(line, sizeof line, "child %d pid=%d\n", k,
                             (int)getpid());
            /* one write() of < PIPE_BUF bytes is atomic */
            if (write(fds[1], line, (size_t)n) != n)
                _exit(100);
            _exit(k);
        }
    }
    close(fds[1]);

    /* Read until EOF (all children closed their ends), print as read. */
    char buf[512];
    size_t len = 0;
    for (;;) {
        ssize_t r = read(fds[0], buf + len, sizeof buf - 1 - len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            die("read");
        }
        if (r == 0)
            break;
        len += (size_t)r;
        /* emit complete lines */
        char *nl;
        while ((nl = memchr(buf, '\n', len)) != NULL) {
            size_t l = (size_t)(nl - buf) + 1;
            fwrite(buf, 1, l, stdout);
            memmove(buf, buf + l, len - l);
            len -= l;
        }
        if (len == sizeof buf - 1) {
            fwrite(buf, 1, len, stdout);
            len = 0;
        }
    }
    if (len > 0)
        fwrite(buf, 1, len, stdout);
    close(fds[0]);

    for (int i = 0; i < 3; i++) {
        int status;
        pid_t w = wait(&status);
        if (w < 0)
            die("wait");
        if (WIFEXITED(status))
            printf("wait: pid=%d status=%d\n", (int)w, WEXITSTATUS(status));
        else
            printf("wait: pid=%d raw_status=0x%x\n", (int)w, status);
    }
    fflush(stdout);

    pid_t v = vfork();
    if (v < 0)
        die("vfork");
    if (v == 0) {
        execl("/bin/echo", "echo", "vforked", (char *)NULL);
        _exit(127);
    }
    int status;
    if (waitpid(v, &status, 0) < 0)
        die("waitpid");
    if (WIFEXITED(status))
        printf("vfork: pid=%d status=%d\n", (int)v, WEXITSTATUS(status));
    else
        printf("vfork: pid=%d raw_status=0x%x\n", (int)v, status);

    printf("spawn_tree: done\n");
    return 0;
}
