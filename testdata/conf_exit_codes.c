/* conf_exit_codes: how exit statuses are reported: exit(0/1/42/255/256),
 * return from main (via re-exec of self), _exit, exit() from a non-main
 * thread (exit_group), main thread pthread_exit while another thread exits
 * later, atexit handlers and stdio flushing at exit, and deaths by signal
 * (abort, SIGSEGV, SIGKILL). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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

static void describe(const char *what, int st)
{
    if (WIFEXITED(st))
        printf("%-28s exited %d\n", what, WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        printf("%-28s signal %d\n", what, WTERMSIG(st));
    else
        printf("%-28s other\n", what);
}

static void no_core(void)
{
    struct rlimit r = {0, 0};
    setrlimit(RLIMIT_CORE, &r);
}

static void *thread_exit_9(void *arg)
{
    (void)arg;
    exit(9);
}

static void *thread_late_return(void *arg)
{
    (void)arg;
    for (volatile int i = 0; i < 1000000; i++)
        ;
    printf("  late thread finishing after main's pthread_exit\n");
    fflush(stdout);
    return NULL;
}

static void *thread_late_exit(void *arg)
{
    (void)arg;
    for (volatile int i = 0; i < 1000000; i++)
        ;
    exit(12);
}

static void at_exit_handler(void)
{
    printf("  atexit handler ran\n");
}

static int run_case(int which)
{
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid != 0) {
        int st;
        CHECK(waitpid(pid, &st, 0) == pid);
        return st;
    }
    pthread_t t;
    switch (which) {
    case 0:
        exit(0);
    case 1:
        exit(1);
    case 2:
        exit(42);
    case 3:
        exit(255);
    case 4:
        exit(256);
    case 5:
        exit(-1);
    case 6:
        _exit(3);
    case 7:
        CHECK(pthread_create(&t, NULL, thread_exit_9, NULL) == 0);
        pthread_join(t, NULL);
        _exit(100);
    case 8:
        CHECK(pthread_create(&t, NULL, thread_late_return, NULL) == 0);
        pthread_exit(NULL);
    case 9:
        CHECK(pthread_create(&t, NULL, thread_late_exit, NULL) == 0);
        pthread_exit(NULL);
    case 10:
        atexit(at_exit_handler);
        printf("  buffered text flushed by exit()\n");
        exit(6);
    case 11:
        printf("  this buffered text is lost by _exit()");
        _exit(7);
    case 12:
        no_core();
        abort();
    case 13:
        no_core();
        raise(SIGSEGV);
        _exit(100);
    case 14:
        raise(SIGKILL);
        _exit(100);
    case 15: {
        execl("/proc/self/exe", "self", "return-from-main", (char *)NULL);
        _exit(127);
    }
    case 16:
        execl("/bin/sh", "sh", "-c", "exit 77", (char *)NULL);
        _exit(127);
    case 17:
        execl("/bin/sh", "sh", "-c", "kill -TERM $$", (char *)NULL);
        _exit(127);
    }
    _exit(100);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "return-from-main") == 0)
        return 23;

    static const char *names[] = {
        "exit(0)",          "exit(1)",           "exit(42)",       "exit(255)",
        "exit(256)",        "exit(-1)",          "_exit(3)",       "exit(9) in thread",
        "pthread_exit main", "late exit(12)",    "atexit + exit(6)", "_exit(7) drops stdio",
        "abort()",          "raise(SIGSEGV)",    "raise(SIGKILL)", "return 23 from main",
        "sh -c 'exit 77'",  "sh kills itself",
    };
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
        describe(names[i], run_case(i));
    return 0;
}
