/* The run's network namespace is made at the first socket: threads and
 * processes that exist before it must still make their sockets inside it.
 *
 * Usage: netns_late MODE NAME
 *   NAME: an abstract AF_UNIX name the test listens on in the host's
 *   network namespace. Connecting to it from inside must be refused, and
 *   binding it inside must succeed (the namespaces do not share names).
 * MODE:
 *   threads     a thread started before any socket connects after main did
 *   fork        a child forked before any socket connects
 *   setuid      the process drops root first, then connects
 *   userns      the process enters a new user namespace first, then connects
 *   socketpair  a socketpair end is bound to NAME
 *   proc        a thread started first reads /proc/thread-self/net/dev
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *name;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int go;

static socklen_t abstract(struct sockaddr_un *a) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    size_t n = strlen(name);
    if (n > sizeof a->sun_path - 2)
        n = sizeof a->sun_path - 2;
    memcpy(a->sun_path + 1, name, n);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* Try the host's listener: "refused" is the answer from inside. */
static void try_connect(const char *who) {
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s < 0) {
        printf("%s: socket: %s\n", who, strerror(errno));
        return;
    }
    struct sockaddr_un a;
    socklen_t len = abstract(&a);
    if (connect(s, (struct sockaddr *)&a, len) == 0)
        printf("%s: connect: reached the host\n", who);
    else
        printf("%s: connect: %s\n", who, errno == ECONNREFUSED ? "refused" : strerror(errno));
    close(s);
}

static void wait_go(void) {
    pthread_mutex_lock(&mu);
    while (!go)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

static void *late_thread(void *arg) {
    wait_go();
    if (arg) {
        FILE *f = fopen("/proc/thread-self/net/dev", "r");
        char line[512];
        int ifaces = 0;
        while (f && fgets(line, sizeof line, f))
            ifaces += strchr(line, ':') != NULL && strchr(line, '|') == NULL;
        if (f)
            fclose(f);
        printf("thread: %d interface(s)\n", ifaces);
    } else {
        try_connect("thread");
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: netns_late MODE NAME\n");
        return 2;
    }
    const char *mode = argv[1];
    name = argv[2];
    setvbuf(stdout, NULL, _IONBF, 0);
    if (!strcmp(mode, "threads") || !strcmp(mode, "proc")) {
        pthread_t t;
        pthread_create(&t, NULL, late_thread, !strcmp(mode, "proc") ? (void *)1 : NULL);
        if (!strcmp(mode, "threads"))
            try_connect("main");
        pthread_mutex_lock(&mu);
        go = 1;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&mu);
        pthread_join(t, NULL);
    } else if (!strcmp(mode, "fork")) {
        int p[2];
        if (pipe(p) != 0)
            return 1;
        pid_t c = fork();
        if (c == 0) {
            char b;
            close(p[1]);
            if (read(p[0], &b, 1) != 0)
                return 1;
            try_connect("child");
            _exit(0);
        }
        close(p[0]);
        try_connect("parent");
        close(p[1]);
        int st;
        waitpid(c, &st, 0);
        printf("child exited %d\n", WEXITSTATUS(st));
    } else if (!strcmp(mode, "setuid")) {
        if (setuid(65534) != 0) {
            printf("setuid: %s\n", strerror(errno));
            return 1;
        }
        try_connect("nobody");
    } else if (!strcmp(mode, "userns")) {
        if (unshare(CLONE_NEWUSER) != 0) {
            printf("unshare: %s\n", strerror(errno));
            return 1;
        }
        try_connect("userns");
    } else if (!strcmp(mode, "socketpair")) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
            printf("socketpair: %s\n", strerror(errno));
            return 1;
        }
        struct sockaddr_un a;
        socklen_t len = abstract(&a);
        if (bind(sv[0], (struct sockaddr *)&a, len) == 0)
            printf("bind: ok\n");
        else
            printf("bind: %s\n", strerror(errno));
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    return 0;
}
