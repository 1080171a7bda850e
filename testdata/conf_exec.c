/* conf_exec: fork+execve of /bin/sh and /bin/true, re-exec of self through
 * /proc/self/exe, argv/envp passing, O_CLOEXEC across exec, exec failure. */
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

extern char **environ;

static int run(char *const argv[], char *const envp[])
{
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        execve(argv[0], argv, envp);
        _exit(127);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "child") == 0) {
        printf("re-exec'd child: argc=%d", argc);
        for (int i = 1; i < argc; i++)
            printf(" [%s]", argv[i]);
        const char *v = getenv("CONF_VAR");
        printf(" CONF_VAR=%s\n", v ? v : "(unset)");
        /* fd 5 is the O_CLOEXEC one, fd 6 the inherited one (see below). */
        printf("re-exec'd child: fd5 open=%d fd6 open=%d\n", fcntl(5, F_GETFD) != -1,
               fcntl(6, F_GETFD) != -1);
        if (fcntl(6, F_GETFD) != -1) {
            char buf[32];
            ssize_t n = read(6, buf, sizeof buf);
            printf("re-exec'd child: read from inherited fd: '%.*s'\n", (int)n, buf);
        }
        return 21;
    }

    char *sh[] = {"/bin/sh", "-c", "echo hello from sh; echo args: \"$0\" \"$1\"; exit 3",
                  "zero", "one", NULL};
    printf("sh exit: %d\n", run(sh, environ));

    char *tru[] = {"/bin/true", NULL};
    printf("true exit: %d\n", run(tru, environ));

    char *sh_env[] = {"/bin/sh", "-c", "echo \"CONF_A=$CONF_A CONF_B=$CONF_B\"", NULL};
    char *env[] = {"CONF_A=alpha", "CONF_B=beta", "PATH=/usr/bin:/bin", NULL};
    printf("sh env exit: %d\n", run(sh_env, env));

    /* Self re-exec with a cloexec fd and an inheritable fd. */
    int p[2];
    CHECK(pipe(p) == 0);
    CHECK(write(p[1], "through exec", 12) == 12);
    close(p[1]);
    CHECK(dup2(p[0], 6) == 6);
    close(p[0]);
    int devnull = open("/dev/null", O_RDONLY);
    CHECK(devnull >= 0);
    CHECK(dup3(devnull, 5, O_CLOEXEC) == 5);
    close(devnull);
    char *self[] = {"/proc/self/exe", "child", "a b", "", "c", NULL};
    char *self_env[] = {"CONF_VAR=set-by-parent", NULL};
    printf("self exit: %d\n", run(self, self_env));
    close(5);
    close(6);

    /* execve failure in the calling process returns with errno. */
    char *bad[] = {"/nonexistent/program", NULL};
    errno = 0;
    int r = execve(bad[0], bad, environ);
    printf("execve missing: %d %s\n", r, errno == ENOENT ? "ENOENT" : "?");
    char *notexec[] = {"/dev/null", NULL};
    errno = 0;
    r = execve(notexec[0], notexec, environ);
    printf("execve non-executable: %d %s\n", r, errno == EACCES ? "EACCES" : "?");

    /* The child's output and the parent's must stay in program order. */
    char *sh_order[] = {"/bin/sh", "-c", "echo child line 1; echo child line 2", NULL};
    printf("before exec child\n");
    printf("ordered exit: %d\n", run(sh_order, environ));
    printf("after exec child\n");
    return 0;
}
