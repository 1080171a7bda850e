/* conf_vfork: vfork semantics: parent suspended until the child _exits or
 * execs; vfork+_exit codes, vfork+execve of /bin/sh and /bin/true, vfork+exec
 * failure, and posix_spawn (which uses CLONE_VFORK in glibc). */
#define _GNU_SOURCE
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
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

int main(void)
{
    int st;
    /* Shared page so that the child's write is well defined. */
    volatile int *flag = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(flag != MAP_FAILED);

    for (int i = 0; i < 3; i++) {
        *flag = 0;
        fflush(stdout);
        pid_t pid = vfork();
        CHECK(pid >= 0);
        if (pid == 0) {
            /* Some work before exiting: the parent must not run meanwhile. */
            for (volatile int k = 0; k < 100000; k++)
                ;
            *flag = 100 + i;
            _exit(i + 1);
        }
        int seen = *flag;
        CHECK(waitpid(pid, &st, 0) == pid);
        printf("vfork %d: parent saw child's write on resume: %d, exit %d\n", i, seen,
               WEXITSTATUS(st));
    }

    char *sh[] = {"/bin/sh", "-c", "echo vforked shell says hi; exit 9", NULL};
    fflush(stdout);
    pid_t pid = vfork();
    CHECK(pid >= 0);
    if (pid == 0) {
        execve(sh[0], sh, environ);
        _exit(127);
    }
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("vfork+exec sh exit %d\n", WEXITSTATUS(st));

    char *tru[] = {"/bin/true", NULL};
    pid = vfork();
    CHECK(pid >= 0);
    if (pid == 0) {
        execve(tru[0], tru, environ);
        _exit(127);
    }
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("vfork+exec true exit %d\n", WEXITSTATUS(st));

    char *missing[] = {"/nonexistent/prog", NULL};
    pid = vfork();
    CHECK(pid >= 0);
    if (pid == 0) {
        execve(missing[0], missing, environ);
        _exit(127);
    }
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("vfork+exec missing exit %d\n", WEXITSTATUS(st));

    char *sp[] = {"/bin/sh", "-c", "echo spawned $0; exit 4", "arg0", NULL};
    fflush(stdout);
    pid_t spid;
    int r = posix_spawn(&spid, sp[0], NULL, NULL, sp, environ);
    CHECK(r == 0);
    CHECK(waitpid(spid, &st, 0) == spid);
    printf("posix_spawn exit %d\n", WEXITSTATUS(st));

    r = posix_spawn(&spid, missing[0], NULL, NULL, missing, environ);
    printf("posix_spawn missing: %s\n", r == ENOENT ? "ENOENT" : "?");
    if (r == 0)
        waitpid(spid, &st, 0);
    return 0;
}
