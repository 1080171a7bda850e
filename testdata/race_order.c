/* Race guest (hunt): order violation at thread creation.
 *
 * main creates a worker and only then publishes the configuration the
 * worker uses (`shared`), after logging a few start-up lines (write
 * syscalls to a log, /dev/null) in between.  The worker logs its start,
 * does some syscall-free set-up, yields (sched_yield) and then reads
 * `shared`.  If the worker gets to run
 * between pthread_create and the assignment it sees NULL: it prints a
 * message and the program exits 1.
 *
 * Under detrun's default schedule main keeps the turn until it blocks in
 * pthread_join, so it assigns first and the default run passes.  The
 * worker's set-up costs nothing under detrun but makes the bad order rare
 * natively (and its yield gives main a CPU back if the worker took it).
 * Chaos seeds that end main's slice between the create and the
 * assignment, and run the worker, fail. */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct config {
    int verbosity;
    char name[32];
};

static struct config *volatile shared;
static int logfd;

static void log_line(const char *s)
{
    if (write(logfd, s, strlen(s)) < 0)
        perror("write log");
}

static void *worker(void *arg)
{
    (void)arg;
    log_line("worker: started\n");
    for (volatile int i = 0; i < 1000000; i++) /* syscall-free set-up */
        ;
    sched_yield(); /* syscall before the use */
    struct config *c = shared;
    if (c == NULL) {
        fprintf(stderr, "race_order: worker saw shared == NULL (used before main assigned it)\n");
        exit(1);
    }
    log_line(c->name);
    return NULL;
}

int main(void)
{
    static const char *const banner[] = {
        "main: worker created\n", "main: loading config\n", "main: verbosity 1\n",
        "main: name ok\n",        "main: checking limits\n", "main: limits ok\n",
        "main: checking paths\n", "main: paths ok\n",
    };
    logfd = open("/dev/null", O_WRONLY);
    if (logfd < 0) {
        perror("open /dev/null");
        return 2;
    }
    static struct config cfg = {1, "config ok\n"};
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0) {
        perror("pthread_create");
        return 2;
    }
    /* syscalls between create and assign */
    for (size_t i = 0; i < sizeof banner / sizeof banner[0]; i++)
        log_line(banner[i]);
    shared = &cfg;
    pthread_join(t, NULL);
    printf("worker used config '%.*s'\n", (int)strcspn(cfg.name, "\n"), cfg.name);
    return 0;
}
