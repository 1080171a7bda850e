/* Race guest (hunt): lost updates to a counter kept in a file.
 *
 * The parent writes 0 to a fresh temporary file and forks two children.
 * Each child increments the counter 5 times by read-modify-write without
 * a lock: open, read, syscalls (progress lines written to a log,
 * /dev/null), lseek 0, write, close.  The parent waits for both and checks
 * the counter is 10; if an interleaving lets one child overwrite the
 * other's update it prints the value and exits 1.
 *
 * Under detrun's default schedule the first child keeps the turn through
 * all of its increments (none of these calls blocks), so the default run
 * passes; natively the second child's syscall-free set-up lets the first
 * one finish before it starts.  Chaos seeds that end a child's slice inside its window and run the other
 * child then lose updates. */
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char path[512];

static long read_counter(int fd)
{
    char buf[32];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    if (n < 0) {
        perror("read");
        exit(2);
    }
    buf[n] = 0;
    return strtol(buf, NULL, 10);
}

static void log_line(int logfd, const char *fmt, long v)
{
    char buf[96];
    int len = snprintf(buf, sizeof buf, fmt, (long)getpid(), v);
    if (write(logfd, buf, len) < 0)
        perror("write log");
}

static void increment(int logfd)
{
    int fd = open(path, O_RDWR);
    if (fd < 0) {
        perror("open counter");
        exit(2);
    }
    long v = read_counter(fd);
    /* syscalls in the window */
    log_line(logfd, "[%ld] read %ld\n", v);
    log_line(logfd, "[%ld] incrementing %ld\n", v);
    log_line(logfd, "[%ld] storing %ld\n", v + 1);
    char buf[32];
    int len = snprintf(buf, sizeof buf, "%ld\n", v + 1);
    if (lseek(fd, 0, SEEK_SET) != 0 || write(fd, buf, len) != len) {
        perror("write counter");
        exit(2);
    }
    close(fd);
}

int main(void)
{
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir)
        dir = "/tmp";
    snprintf(path, sizeof path, "%s/race_files.XXXXXX", dir);
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        return 2;
    }
    if (write(fd, "0\n", 2) != 2) {
        perror("write");
        return 2;
    }
    close(fd);
    int logfd = open("/dev/null", O_WRONLY);
    if (logfd < 0) {
        perror("open /dev/null");
        return 2;
    }
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        if (kids[k] < 0) {
            perror("fork");
            return 2;
        }
        if (kids[k] == 0) {
            /* The second child first does some syscall-free set-up, with
             * a yield now and then: free under detrun, but natively it
             * lets the first child finish. */
            for (int r = 0; k == 1 && r < 4; r++) {
                for (volatile int i = 0; i < 250000; i++)
                    ;
                sched_yield();
            }
            for (int i = 0; i < 5; i++)
                increment(logfd);
            _exit(0);
        }
    }
    int bad = 0;
    for (int k = 0; k < 2; k++) {
        int st;
        if (waitpid(kids[k], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            bad = 1;
    }
    fd = open(path, O_RDONLY);
    long v = fd >= 0 ? read_counter(fd) : -1;
    if (fd >= 0)
        close(fd);
    unlink(path);
    if (bad) {
        fprintf(stderr, "race_files: a child failed\n");
        return 2;
    }
    if (v != 10) {
        fprintf(stderr, "race_files: lost update: counter is %ld, expected 10\n", v);
        return 1;
    }
    printf("counter %ld\n", v);
    return 0;
}
