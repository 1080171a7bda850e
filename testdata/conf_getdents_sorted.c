/* conf_getdents_sorted: creates a directory tree, lists it with readdir
 * (getdents64), sorts the names itself before printing (directory order is
 * filesystem-defined), checks d_type (falling back to lstat), rewinddir,
 * listing while entries are removed, and a raw getdents64 count. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char type_of(DIR *d, const struct dirent *e)
{
    unsigned char t = e->d_type;
    if (t == DT_UNKNOWN) {
        struct stat st;
        CHECK(fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0);
        if (S_ISREG(st.st_mode))
            t = DT_REG;
        else if (S_ISDIR(st.st_mode))
            t = DT_DIR;
        else if (S_ISLNK(st.st_mode))
            t = DT_LNK;
        else if (S_ISFIFO(st.st_mode))
            t = DT_FIFO;
    }
    switch (t) {
    case DT_REG:
        return 'f';
    case DT_DIR:
        return 'd';
    case DT_LNK:
        return 'l';
    case DT_FIFO:
        return 'p';
    default:
        return '?';
    }
}

/* Lists `path`, prints sorted "<type> <name>" lines, returns the count. */
static int list_sorted(const char *path, const char *label)
{
    DIR *d = opendir(path);
    CHECK(d != NULL);
    char *names[128];
    int n = 0, dots = 0;
    struct dirent *e;
    errno = 0;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            dots++;
            CHECK(type_of(d, e) == 'd');
            continue;
        }
        CHECK(n < 128);
        char *s = malloc(strlen(e->d_name) + 3);
        CHECK(s != NULL);
        sprintf(s, "%s %c", e->d_name, type_of(d, e));
        names[n++] = s;
    }
    CHECK(errno == 0);
    closedir(d);
    qsort(names, n, sizeof names[0], cmp_str);
    printf("%s: %d entries (+%d dot entries)\n", label, n, dots);
    for (int i = 0; i < n; i++) {
        printf("  %s\n", names[i]);
        free(names[i]);
    }
    return n;
}

int main(void)
{
    char path[600];
    CHECK(mkdtemp(dir) != NULL);
    CHECK(chdir(dir) == 0);

    const char *files[] = {"zeta",   "alpha",  "Beta",  "delta.txt", "10",
                           "9",      "a b c",  ".hidden", "emoji-\xc3\xa9", "~tilde",
                           "gamma-", "_under", "x.y.z"};
    int nf = sizeof files / sizeof files[0];
    for (int i = 0; i < nf; i++) {
        int fd = open(files[i], O_CREAT | O_WRONLY, 0644);
        CHECK(fd >= 0);
        CHECK(write(fd, files[i], strlen(files[i])) == (ssize_t)strlen(files[i]));
        close(fd);
    }
    CHECK(mkdir("subdir", 0755) == 0);
    CHECK(mkdir("subdir/inner", 0755) == 0);
    CHECK(symlink("alpha", "link-to-alpha") == 0);
    CHECK(mkfifo("fifo", 0644) == 0);
    for (int i = 0; i < 40; i++) {
        snprintf(path, sizeof path, "subdir/file%03d", (i * 37) % 40);
        int fd = open(path, O_CREAT | O_WRONLY, 0644);
        CHECK(fd >= 0);
        close(fd);
    }

    list_sorted(".", "top");
    int sub = list_sorted("subdir", "subdir");

    /* rewinddir gives the same set again. */
    DIR *d = opendir("subdir");
    CHECK(d != NULL);
    int first = 0, second = 0;
    while (readdir(d))
        first++;
    rewinddir(d);
    while (readdir(d))
        second++;
    closedir(d);
    printf("rewinddir: first pass %d, second pass %d\n", first, second);

    /* Raw getdents64 with a small buffer, counting entries over several calls. */
    int dfd = open("subdir", O_RDONLY | O_DIRECTORY);
    CHECK(dfd >= 0);
    char buf[256];
    int raw = 0;
    long nread;
    while ((nread = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < nread;) {
            unsigned short reclen = *(unsigned short *)(buf + off + 16);
            raw++;
            off += reclen;
        }
    }
    CHECK(nread == 0);
    close(dfd);
    printf("raw getdents64 with 256-byte buffer: %d entries\n", raw);

    /* Remove every file while listing; everything must go exactly once. */
    d = opendir("subdir");
    CHECK(d != NULL);
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "file", 4) == 0) {
            CHECK(unlinkat(dirfd(d), e->d_name, 0) == 0);
            removed++;
        }
    }
    closedir(d);
    printf("removed while listing: %d of %d\n", removed, sub - 1);
    list_sorted("subdir", "subdir after removal");

    CHECK(rmdir("subdir/inner") == 0);
    CHECK(rmdir("subdir") == 0);
    for (int i = 0; i < nf; i++)
        CHECK(unlink(files[i]) == 0);
    CHECK(unlink("link-to-alpha") == 0);
    CHECK(unlink("fifo") == 0);
    list_sorted(".", "top after cleanup");
    CHECK(chdir("/") == 0);
    CHECK(rmdir(dir) == 0);
    return 0;
}
