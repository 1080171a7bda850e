/* List a directory with raw getdents64 using a given buffer size; print the
 * names in the order the kernel (or detrun) returned them. Usage:
 * fs_listdir DIR BUFSIZE */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

struct d64 { unsigned long ino; long off; unsigned short reclen; unsigned char type; char name[]; };

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int fd = open(argv[1], O_RDONLY | O_DIRECTORY);
    if (fd < 0) { perror("open"); return 1; }
    size_t sz = strtoul(argv[2], 0, 10);
    char *buf = malloc(sz);
    long n, total = 0;
    while ((n = syscall(SYS_getdents64, fd, buf, sz)) > 0) {
        for (long o = 0; o < n;) {
            struct d64 *d = (struct d64 *)(buf + o);
            printf("%s\n", d->name);
            total++;
            o += d->reclen;
        }
    }
    if (n < 0) { perror("getdents64"); return 1; }
    fprintf(stderr, "entries: %ld\n", total);
    return 0;
}
