/* conf_exec_thread: execve called from a non-main thread while other threads
 * (including the main thread) are blocked. After exec the process keeps its
 * pid, has exactly one thread, and the exec'd image runs normally; also a
 * fork from a non-main thread whose child then execs. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
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

static int thread_count(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    int n = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    fclose(f);
    return n;
}

static pthread_barrier_t ready;
static int pipe_fd[2];

static void *sleeper(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&ready);
    char c;
    /* Blocks forever: nobody writes to this pipe. */
    (void)!read(pipe_fd[0], &c, 1);
    return NULL;
}

static void *execer(void *arg)
{
    const char *stage = arg;
    pthread_barrier_wait(&ready);
    char pidbuf[32];
    snprintf(pidbuf, sizeof pidbuf, "%ld", (long)getpid());
    char *argv[] = {"/proc/self/exe", (char *)stage, pidbuf, NULL};
    fflush(stdout);
    execv(argv[0], argv);
    fprintf(stderr, "execv failed: %s\n", strerror(errno));
    _exit(127);
}

static void *forker(void *arg)
{
    (void)arg;
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        printf("forked-from-thread child: threads=%d\n", thread_count());
        fflush(stdout);
        execl("/bin/sh", "sh", "-c", "echo shell run by a child of a thread; exit 6",
              (char *)NULL);
        _exit(127);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    return (void *)(long)WEXITSTATUS(st);
}

static void spawn_and_exec(const char *stage)
{
    CHECK(pipe(pipe_fd) == 0);
    CHECK(pthread_barrier_init(&ready, NULL, 4) == 0);
    pthread_t t1, t2, t3;
    CHECK(pthread_create(&t1, NULL, sleeper, NULL) == 0);
    CHECK(pthread_create(&t2, NULL, sleeper, NULL) == 0);
    CHECK(pthread_create(&t3, NULL, execer, (void *)stage) == 0);
    pthread_barrier_wait(&ready);
    /* The main thread blocks in join; exec in t3 tears it down. */
    pthread_join(t1, NULL);
    fprintf(stderr, "main thread survived exec?\n");
    exit(1);
}

int main(int argc, char **argv)
{
    if (argc == 3) {
        long orig = strtol(argv[2], NULL, 10);
        printf("%s: pid preserved=%d threads=%d\n", argv[1], (long)getpid() == orig,
               thread_count());
        if (strcmp(argv[1], "stage1") == 0) {
            /* Exec again from a thread of the new image. */
            printf("stage1: exec'ing again from a thread\n");
            spawn_and_exec("stage2");
        }
        printf("%s: done\n", argv[1]);
        return 0;
    }

    printf("main: threads before=%d\n", thread_count());
    pthread_t f;
    void *ret;
    CHECK(pthread_create(&f, NULL, forker, NULL) == 0);
    CHECK(pthread_join(f, &ret) == 0);
    printf("main: thread's child exit %ld\n", (long)ret);

    printf("main: exec'ing from a non-main thread\n");
    spawn_and_exec("stage1");
    return 1;
}
