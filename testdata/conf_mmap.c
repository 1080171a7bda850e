/* conf_mmap: anonymous private mappings, file-backed MAP_SHARED writes seen
 * through read(), MAP_PRIVATE copy-on-write, MAP_SHARED|MAP_ANONYMOUS shared
 * with a forked child, private anonymous memory not shared after fork,
 * mprotect, mremap and munmap. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <signal.h>
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

static uint32_t checksum(const unsigned char *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

int main(void)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    size_t len = 64 * pg;

    unsigned char *anon = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(anon != MAP_FAILED);
    int zero = 1;
    for (size_t i = 0; i < len; i++)
        if (anon[i])
            zero = 0;
    printf("fresh anonymous memory zeroed: %d\n", zero);
    for (size_t i = 0; i < len; i++)
        anon[i] = (unsigned char)(i * 7 + i / 4096);
    uint32_t ck = checksum(anon, len);
    printf("anonymous checksum: %08x\n", ck);

    /* mremap grow keeps contents. */
    unsigned char *grown = mremap(anon, len, 2 * len, MREMAP_MAYMOVE);
    CHECK(grown != MAP_FAILED);
    printf("mremap kept contents: %d, new tail zero: %d\n",
           checksum(grown, len) == ck,
           grown[len + 100] == 0);
    CHECK(munmap(grown, 2 * len) == 0);

    /* File-backed shared mapping. */
    char dir[] = "/tmp/detrun-conf-XXXXXX";
    char path[512];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/m", dir);
    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
    CHECK(fd >= 0);
    CHECK(ftruncate(fd, 2 * pg) == 0);
    char *fm = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(fm != MAP_FAILED);
    strcpy(fm, "written through MAP_SHARED");
    strcpy(fm + pg, "second page");
    CHECK(msync(fm, 2 * pg, MS_SYNC) == 0);
    char buf[64] = {0};
    CHECK(pread(fd, buf, 26, 0) == 26);
    printf("read() sees: '%s'\n", buf);
    CHECK(pread(fd, buf, 11, pg) == 11);
    buf[11] = 0;
    printf("read() page 2: '%s'\n", buf);
    CHECK(pwrite(fd, "WRITTEN", 7, 0) == 7);
    printf("mapping sees pwrite: '%.26s'\n", fm);

    /* Private file mapping: COW, writes invisible to the file. */
    char *pm = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    CHECK(pm != MAP_FAILED);
    printf("private mapping initially: '%.7s'\n", pm);
    memcpy(pm, "private", 7);
    CHECK(pread(fd, buf, 7, 0) == 7);
    printf("after private write: mapping '%.7s' file '%.7s' shared '%.7s'\n", pm, buf, fm);
    CHECK(munmap(pm, pg) == 0);

    /* Shared anonymous memory across fork; private memory is copied. */
    volatile int *shared = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(shared != MAP_FAILED);
    volatile int *priv = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(priv != MAP_FAILED);
    shared[0] = 1;
    priv[0] = 1;
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        shared[0] = 500;
        priv[0] = 600;
        for (int i = 1; i < 100; i++)
            shared[i] = i * i;
        fm[0] = 'w';
        _exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    long s = 0;
    for (int i = 1; i < 100; i++)
        s += shared[i];
    printf("after child: shared[0]=%d priv[0]=%d sum=%ld file byte='%c'\n", shared[0], priv[0],
           s, fm[0]);

    /* mprotect: a read-only page faults in a child (SIGSEGV). */
    CHECK(mprotect((void *)priv, pg, PROT_READ) == 0);
    printf("read from read-only page: %d\n", priv[0]);
    fflush(stdout);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        struct rlimit nocore = {0, 0};
        setrlimit(RLIMIT_CORE, &nocore);
        priv[0] = 2;
        _exit(0);
    }
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("child writing read-only page: signaled=%d SIGSEGV=%d\n", WIFSIGNALED(st),
           WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
    CHECK(mprotect((void *)priv, pg, PROT_READ | PROT_WRITE) == 0);
    priv[0] = 3;
    printf("after mprotect back: %d\n", priv[0]);

    errno = 0;
    void *bad = mmap(NULL, pg, PROT_READ, MAP_SHARED, 12345, 0);
    printf("mmap bad fd: failed=%d %s\n", bad == MAP_FAILED, errno == EBADF ? "EBADF" : "?");

    CHECK(munmap((void *)shared, pg) == 0);
    CHECK(munmap((void *)priv, pg) == 0);
    CHECK(munmap(fm, 2 * pg) == 0);
    close(fd);
    CHECK(unlink(path) == 0);
    CHECK(rmdir(dir) == 0);
    return 0;
}
