/* conf_files: basic file I/O semantics (open/read/write/lseek/pread/pwrite,
 * O_APPEND, holes, ftruncate, stat, rename, link, symlink, mkdir, errors). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s (errno %d)\n", __FILE__, \
                    __LINE__, #c, errno);                                     \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static char dir[] = "/tmp/detrun-conf-XXXXXX";

static const char *in_dir(const char *name)
{
    static char bufs[4][512];
    static int i;
    char *b = bufs[i++ % 4];
    snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
    return b;
}

int main(void)
{
    char buf[256];
    struct stat st;
    ssize_t n;

    umask(022);
    CHECK(mkdtemp(dir) != NULL);

    int fd = open(in_dir("a.txt"), O_CREAT | O_EXCL | O_RDWR, 0644);
    CHECK(fd >= 0);
    const char *msg = "hello, deterministic world\n";
    n = write(fd, msg, strlen(msg));
    printf("write returned %zd\n", n);
    printf("offset after write %lld\n", (long long)lseek(fd, 0, SEEK_CUR));

    CHECK(lseek(fd, 7, SEEK_SET) == 7);
    n = read(fd, buf, 13);
    printf("read at 7: %zd '%.*s'\n", n, (int)n, buf);

    CHECK(pwrite(fd, "HELLO", 5, 0) == 5);
    n = pread(fd, buf, 10, 0);
    printf("pread: %zd '%.*s'\n", n, (int)n, buf);
    printf("offset unchanged by pread/pwrite: %lld\n",
           (long long)lseek(fd, 0, SEEK_CUR));

    n = read(fd, buf, sizeof buf);
    printf("read to eof: %zd, then read again: %zd\n", n, read(fd, buf, 10));

    CHECK(ftruncate(fd, 5) == 0);
    CHECK(fstat(fd, &st) == 0);
    printf("size after ftruncate %lld\n", (long long)st.st_size);

    CHECK(lseek(fd, 100, SEEK_SET) == 100);
    CHECK(write(fd, "x", 1) == 1);
    CHECK(fstat(fd, &st) == 0);
    printf("size after write past end %lld\n", (long long)st.st_size);
    memset(buf, 'z', sizeof buf);
    n = pread(fd, buf, 10, 50);
    int zeros = 1;
    for (int i = 0; i < n; i++)
        if (buf[i] != 0)
            zeros = 0;
    printf("hole reads %zd zero bytes: %s\n", n, zeros ? "yes" : "no");

    int afd = open(in_dir("a.txt"), O_WRONLY | O_APPEND);
    CHECK(afd >= 0);
    CHECK(lseek(afd, 0, SEEK_SET) == 0);
    CHECK(write(afd, "tail", 4) == 4);
    CHECK(fstat(fd, &st) == 0);
    printf("size after O_APPEND write %lld\n", (long long)st.st_size);
    n = pread(fd, buf, 4, 101);
    printf("appended data: '%.*s'\n", (int)n, buf);
    errno = 0;
    n = read(afd, buf, 1);
    printf("read on O_WRONLY fd: %zd %s\n", n, errno == EBADF ? "EBADF" : "?");
    CHECK(close(afd) == 0);
    CHECK(fsync(fd) == 0);
    CHECK(close(fd) == 0);

    CHECK(stat(in_dir("a.txt"), &st) == 0);
    printf("stat: regular=%d mode=%o size=%lld nlink=%ld\n", S_ISREG(st.st_mode),
           st.st_mode & 0777, (long long)st.st_size, (long)st.st_nlink);

    errno = 0;
    fd = open(in_dir("a.txt"), O_CREAT | O_EXCL | O_RDWR, 0644);
    printf("O_EXCL on existing: %d %s\n", fd, errno == EEXIST ? "EEXIST" : "?");
    errno = 0;
    fd = open(in_dir("missing"), O_RDONLY);
    printf("open missing: %d %s\n", fd, errno == ENOENT ? "ENOENT" : "?");

    CHECK(rename(in_dir("a.txt"), in_dir("b.txt")) == 0);
    printf("after rename: a exists=%d b exists=%d\n",
           access(in_dir("a.txt"), F_OK) == 0, access(in_dir("b.txt"), F_OK) == 0);

    CHECK(link(in_dir("b.txt"), in_dir("c.txt")) == 0);
    CHECK(stat(in_dir("b.txt"), &st) == 0);
    printf("nlink after link %ld\n", (long)st.st_nlink);

    CHECK(symlink("b.txt", in_dir("d.lnk")) == 0);
    n = readlink(in_dir("d.lnk"), buf, sizeof buf);
    printf("readlink: '%.*s'\n", (int)n, buf);
    CHECK(lstat(in_dir("d.lnk"), &st) == 0);
    printf("lstat is symlink: %d\n", S_ISLNK(st.st_mode));
    fd = open(in_dir("d.lnk"), O_RDONLY);
    CHECK(fd >= 0);
    n = read(fd, buf, 5);
    printf("read via symlink: '%.*s'\n", (int)n, buf);
    close(fd);

    FILE *f = fopen(in_dir("e.txt"), "w+");
    CHECK(f != NULL);
    for (int i = 0; i < 5; i++)
        fprintf(f, "line %d: %d\n", i, i * i);
    rewind(f);
    int lines = 0;
    while (fgets(buf, sizeof buf, f)) {
        lines++;
        if (lines == 4)
            printf("stdio line 4: %s", buf);
    }
    printf("stdio lines: %d\n", lines);
    fclose(f);

    CHECK(mkdir(in_dir("sub"), 0755) == 0);
    errno = 0;
    int r = mkdir(in_dir("sub"), 0755);
    printf("mkdir existing: %d %s\n", r, errno == EEXIST ? "EEXIST" : "?");
    CHECK(rmdir(in_dir("sub")) == 0);

    CHECK(unlink(in_dir("b.txt")) == 0);
    CHECK(stat(in_dir("c.txt"), &st) == 0);
    printf("nlink after unlink %ld\n", (long)st.st_nlink);
    CHECK(unlink(in_dir("c.txt")) == 0);
    CHECK(unlink(in_dir("d.lnk")) == 0);
    CHECK(unlink(in_dir("e.txt")) == 0);
    CHECK(rmdir(dir) == 0);
    printf("cleanup ok\n");
    return 0;
}
