/* The stat fast path: the same file through stat, lstat, fstat, fstatat,
 * statx and readdir gives one virtual inode and device; files written
 * during the run get newer virtual times; loops of calls (answered in the
 * tracee once their call sites are patched) keep answering alike; a forked
 * child and threads too.
 * Usage: fast_stat DIR (an empty scratch directory) | fast_stat threads |
 * fast_stat watch FILE (stat FILE in a loop, printing only a count) |
 * fast_stat read FILE (FILE in 100-byte reads, then a pipe and
 * /dev/urandom through the same read site) */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

static int bad;

static void check(int ok, const char *what, const char *path) {
    if (!ok) {
        printf("MISMATCH %s %s\n", what, path);
        bad++;
    }
}

static void show(const char *path) {
    struct stat s, l, f, a;
    struct statx x;
    if (stat(path, &s) != 0 || lstat(path, &l) != 0 || fstatat(AT_FDCWD, path, &a, 0) != 0 ||
        statx(AT_FDCWD, path, 0, STATX_BASIC_STATS | STATX_BTIME, &x) != 0) {
        printf("%s: cannot stat\n", path);
        bad++;
        return;
    }
    int fd = open(path, O_RDONLY);
    if (fd < 0 || fstat(fd, &f) != 0) {
        printf("%s: cannot fstat\n", path);
        bad++;
        return;
    }
    close(fd);
    check(s.st_ino == x.stx_ino && s.st_ino == f.st_ino && s.st_ino == a.st_ino, "ino", path);
    check(s.st_dev == makedev(x.stx_dev_major, x.stx_dev_minor) && s.st_dev == f.st_dev, "dev",
          path);
    check(s.st_mtim.tv_sec == x.stx_mtime.tv_sec && s.st_mtim.tv_nsec == (long)x.stx_mtime.tv_nsec,
          "mtime", path);
    check(s.st_atim.tv_sec == s.st_mtim.tv_sec, "atime", path);
    printf("%s ino %lu dev %lu mode %o size %ld mtime %ld.%09ld ctime %ld.%09ld btime %lld lino %lu\n",
           path, (unsigned long)s.st_ino, (unsigned long)s.st_dev, s.st_mode, (long)s.st_size,
           (long)s.st_mtim.tv_sec, s.st_mtim.tv_nsec, (long)s.st_ctim.tv_sec, s.st_ctim.tv_nsec,
           (long long)x.stx_btime.tv_sec, (unsigned long)l.st_ino);
}

static void listing(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat s;
        if (lstat(p, &s) == 0) check(s.st_ino == e->d_ino, "d_ino", p);
        printf("entry %s %lu\n", e->d_name, (unsigned long)e->d_ino);
    }
    closedir(d);
}

static const char *files[] = {"/etc/passwd", "/etc/hostname", "/usr/bin", "/usr/bin/env",
                              "/usr/bin/sh", "/bin", "/usr/lib", "/etc"};
#define NFILES (sizeof files / sizeof files[0])

static void *worker(void *arg) {
    long id = (long)arg;
    unsigned long sum = 0;
    for (int i = 0; i < 300; i++) {
        struct stat s;
        const char *p = files[(i * (id + 1) + id) % NFILES];
        if (stat(p, &s) == 0) sum = sum * 31 + s.st_ino;
        if (i % 50 == 0) usleep(100);
    }
    printf("thread %ld sum %lu\n", id, sum);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *dir = argv[1];
    setvbuf(stdout, 0, _IOLBF, 0);
    if (!strcmp(argv[1], "read") && argc > 2) {
        /* One read site (glibc's read) for every kind of descriptor: the
         * regular file's reads are made in the tracee once it is patched,
         * the others still go to detrun. */
        int fd = open(argv[2], O_RDONLY);
        if (fd < 0) return 1;
        char b[100];
        unsigned long sum = 0, total = 0;
        long n;
        while ((n = read(fd, b, sizeof b)) > 0) {
            for (long i = 0; i < n; i++) sum = sum * 31 + (unsigned char)b[i];
            total += n;
        }
        close(fd);
        printf("file %lu bytes, sum %lx, last read %ld\n", total, sum, n);
        int p[2];
        if (pipe(p) != 0) return 1;
        if (fork() == 0) {
            for (int i = 0; i < 50; i++) write(p[1], "0123456789", 10);
            _exit(0);
        }
        close(p[1]);
        total = 0;
        while ((n = read(p[0], b, 7)) > 0) total += n;
        wait(NULL);
        printf("pipe %lu bytes\n", total);
        int r = open("/dev/urandom", O_RDONLY);
        if (r < 0 || read(r, b, 16) != 16) return 1;
        printf("urandom");
        for (int i = 0; i < 16; i++) printf(" %02x", (unsigned char)b[i]);
        printf("\n");
        return 0;
    }
    if (!strcmp(argv[1], "watch") && argc > 2) {
        unsigned long ok = 0;
        for (int i = 0; i < 500; i++) {
            struct stat s;
            ok += stat(argv[2], &s) == 0;
        }
        printf("watch ok %lu\n", ok);
        return 0;
    }
    if (!strcmp(argv[1], "threads")) {
        pthread_t t[4];
        for (long i = 0; i < 4; i++) pthread_create(&t[i], 0, worker, (void *)i);
        for (int i = 0; i < 4; i++) pthread_join(t[i], 0);
        for (unsigned i = 0; i < NFILES; i++) show(files[i]);
        return bad ? 1 : 0;
    }
    for (unsigned i = 0; i < NFILES; i++) show(files[i]);
    /* Written during the run: newer virtual times, answered by detrun. */
    char p[4096];
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/new%d", dir, i);
        FILE *f = fopen(p, "w");
        if (!f) return 3;
        fprintf(f, "%d\n", i);
        fclose(f);
        show(p);
        usleep(20000);
    }
    snprintf(p, sizeof p, "%s/new0", dir);
    FILE *f = fopen(p, "a");
    fputs("more\n", f);
    fclose(f);
    show(p);
    listing(dir);
    /* A loop: the same answer every time. */
    struct stat first;
    stat("/etc/passwd", &first);
    unsigned long same = 0;
    for (int i = 0; i < 2000; i++) {
        struct stat s;
        struct statx x;
        if (stat("/etc/passwd", &s) == 0 && s.st_ino == first.st_ino && s.st_mtime == first.st_mtime)
            same++;
        if (statx(AT_FDCWD, "/usr/bin/env", 0, STATX_BASIC_STATS, &x) == 0 && x.stx_ino != 0) same++;
    }
    printf("loop same %lu of 4000\n", same);
    /* Errors come back as the kernel gave them. */
    struct stat s;
    errno = 0;
    for (int i = 0; i < 5; i++) {
        int r = stat("/nonexistent/detrun", &s);
        printf("missing %d %d\n", r, errno);
    }
    pid_t c = fork();
    if (c == 0) {
        unsigned long sum = 0;
        for (int i = 0; i < 500; i++)
            if (stat(files[i % NFILES], &s) == 0) sum = sum * 31 + s.st_ino;
        printf("child sum %lu\n", sum);
        show("/usr/bin/env");
        _exit(0);
    }
    int st;
    waitpid(c, &st, 0);
    printf("child %d\n", WEXITSTATUS(st));
    printf("bad %d\n", bad);
    return bad ? 1 : 0;
}
