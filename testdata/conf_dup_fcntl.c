/* conf_dup_fcntl: dup/dup2/dup3/F_DUPFD(_CLOEXEC) semantics, lowest free
 * descriptor rule, shared offsets between duplicates, FD_CLOEXEC, O_NONBLOCK
 * via F_SETFL, EBADF cases, and fcntl record locks seen from a child. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s (errno %d)\n", __FILE__, \
                    __LINE__, #c, errno);                                     \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

int main(void)
{
    char dir[] = "/tmp/detrun-conf-XXXXXX";
    char path[512], buf[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/f", dir);

    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, "0123456789", 10) == 10);

    /* Lowest free descriptor. */
    int a = dup(fd);
    CHECK(a >= 0);
    close(a);
    int b = dup(fd);
    printf("dup reuses lowest free fd: %s\n", a == b ? "yes" : "no");
    printf("dup result above original: %s\n", b > fd ? "yes" : "no");

    /* Shared offset. */
    CHECK(lseek(fd, 2, SEEK_SET) == 2);
    printf("dup shares offset: %lld\n", (long long)lseek(b, 0, SEEK_CUR));
    CHECK(read(b, buf, 3) == 3);
    printf("read via dup '%.3s', original offset now %lld\n", buf,
           (long long)lseek(fd, 0, SEEK_CUR));
    close(b);

    /* A separately opened fd has its own offset. */
    int other = open(path, O_RDONLY);
    CHECK(other >= 0);
    printf("independent open offset: %lld\n", (long long)lseek(other, 0, SEEK_CUR));
    close(other);

    /* dup2 to a chosen number, dup2 onto itself, dup3 flags. */
    printf("dup2(fd, 40) = %d\n", dup2(fd, 40));
    printf("dup2(40, 40) = %d\n", dup2(40, 40));
    printf("fd 40 cloexec after dup2: %d\n", (fcntl(40, F_GETFD) & FD_CLOEXEC) != 0);
    printf("dup3(fd, 41, O_CLOEXEC) = %d\n", dup3(fd, 41, O_CLOEXEC));
    printf("fd 41 cloexec after dup3: %d\n", (fcntl(41, F_GETFD) & FD_CLOEXEC) != 0);
    errno = 0;
    int r = dup3(41, 41, 0);
    printf("dup3 same fd: %d %s\n", r, errno == EINVAL ? "EINVAL" : "?");

    /* F_DUPFD picks lowest >= arg. */
    printf("F_DUPFD >= 50: %d\n", fcntl(fd, F_DUPFD, 50));
    printf("F_DUPFD >= 50 again: %d\n", fcntl(fd, F_DUPFD, 50));
    int c = fcntl(fd, F_DUPFD_CLOEXEC, 60);
    printf("F_DUPFD_CLOEXEC >= 60: %d cloexec=%d\n", c, (fcntl(c, F_GETFD) & FD_CLOEXEC) != 0);
    CHECK(fcntl(c, F_SETFD, 0) == 0);
    printf("after F_SETFD 0: cloexec=%d\n", (fcntl(c, F_GETFD) & FD_CLOEXEC) != 0);
    close(40);
    close(41);
    close(50);
    close(51);
    close(60);

    /* dup2 replaces an open target (here: make stdout-like fd 45 point to file). */
    int p[2];
    CHECK(pipe(p) == 0);
    CHECK(dup2(p[1], 45) == 45);
    CHECK(dup2(fd, 45) == 45);
    close(p[1]);
    printf("pipe EOF after dup2 replaced last writer: %zd\n", read(p[0], buf, 1));
    close(p[0]);
    close(45);

    /* Access mode and status flags. */
    int fl = fcntl(fd, F_GETFL);
    printf("access mode O_RDWR: %d append=%d\n", (fl & O_ACCMODE) == O_RDWR,
           (fl & O_APPEND) != 0);
    CHECK(fcntl(fd, F_SETFL, fl | O_APPEND) == 0);
    fl = fcntl(fd, F_GETFL);
    printf("after F_SETFL O_APPEND: append=%d\n", (fl & O_APPEND) != 0);
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    CHECK(write(fd, "AB", 2) == 2);
    CHECK(pread(fd, buf, 12, 0) == 12);
    printf("contents after append-mode write: '%.12s'\n", buf);

    CHECK(pipe(p) == 0);
    CHECK(fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK) == 0);
    errno = 0;
    ssize_t n = read(p[0], buf, 1);
    printf("nonblocking empty pipe read: %zd %s\n", n, errno == EAGAIN ? "EAGAIN" : "?");
    close(p[0]);
    close(p[1]);

    /* Bad descriptors. */
    errno = 0;
    r = dup(-1);
    printf("dup(-1): %d %s\n", r, errno == EBADF ? "EBADF" : "?");
    errno = 0;
    r = close(900);
    printf("close(900): %d %s\n", r, errno == EBADF ? "EBADF" : "?");
    errno = 0;
    r = fcntl(900, F_GETFD);
    printf("fcntl(900, F_GETFD): %d %s\n", r, errno == EBADF ? "EBADF" : "?");

    /* Record lock: a child sees our write lock with F_GETLK. */
    struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 4};
    CHECK(fcntl(fd, F_SETLK, &lk) == 0);
    fflush(stdout);
    pid_t parent = getpid();
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int cfd = open(path, O_RDWR);
        CHECK(cfd >= 0);
        struct flock q = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 2, .l_len = 1};
        CHECK(fcntl(cfd, F_GETLK, &q) == 0);
        printf("child F_GETLK: type=%s start=%lld len=%lld by-parent=%d\n",
               q.l_type == F_WRLCK ? "F_WRLCK" : "other", (long long)q.l_start,
               (long long)q.l_len, q.l_pid == parent);
        struct flock t = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
        errno = 0;
        int r = fcntl(cfd, F_SETLK, &t);
        printf("child F_SETLK conflicting: %d %s\n", r,
               (errno == EAGAIN || errno == EACCES) ? "EAGAIN/EACCES" : "?");
        t.l_start = 10;
        printf("child F_SETLK disjoint: %d\n", fcntl(cfd, F_SETLK, &t));
        fflush(stdout);
        _exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("child exit %d\n", WEXITSTATUS(st));

    close(fd);
    CHECK(unlink(path) == 0);
    CHECK(rmdir(dir) == 0);
    return 0;
}
