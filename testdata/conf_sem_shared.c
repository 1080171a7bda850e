/* conf_sem_shared: POSIX semaphores: process-shared sem_t in a MAP_SHARED
 * page used for strict parent/child turn taking, thread-shared semaphores
 * as a counting resource, sem_trywait/sem_getvalue/sem_timedwait timeout. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s (errno %d)\n", __FILE__, \
                    __LINE__, #c, errno);                                     \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

#define TURNS 50

struct shared {
    sem_t parent_turn, child_turn;
    char trace[2 * TURNS + 1];
    int len;
};

static sem_t slots;
static int in_use, max_in_use;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

static void *user(void *arg)
{
    (void)arg;
    for (int i = 0; i < 200; i++) {
        while (sem_wait(&slots) != 0)
            CHECK(errno == EINTR);
        pthread_mutex_lock(&m);
        in_use++;
        if (in_use > max_in_use)
            max_in_use = in_use;
        CHECK(in_use <= 2);
        in_use--;
        pthread_mutex_unlock(&m);
        CHECK(sem_post(&slots) == 0);
    }
    return NULL;
}

int main(void)
{
    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    CHECK(sem_init(&sh->parent_turn, 1, 1) == 0);
    CHECK(sem_init(&sh->child_turn, 1, 0) == 0);

    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        for (int i = 0; i < TURNS; i++) {
            while (sem_wait(&sh->child_turn) != 0)
                ;
            sh->trace[sh->len++] = 'c';
            sem_post(&sh->parent_turn);
        }
        _exit(0);
    }
    for (int i = 0; i < TURNS; i++) {
        while (sem_wait(&sh->parent_turn) != 0)
            ;
        sh->trace[sh->len++] = 'P';
        sem_post(&sh->child_turn);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("turns: %s\n", sh->trace);
    int v;
    CHECK(sem_getvalue(&sh->parent_turn, &v) == 0);
    printf("parent_turn value at end: %d\n", v);

    errno = 0;
    int r = sem_trywait(&sh->child_turn);
    printf("trywait on zero: %d %s\n", r, errno == EAGAIN ? "EAGAIN" : "?");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 10 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    do {
        errno = 0;
        r = sem_timedwait(&sh->child_turn, &ts);
    } while (r != 0 && errno == EINTR);
    printf("timedwait on zero: %d %s\n", r, errno == ETIMEDOUT ? "ETIMEDOUT" : "?");

    CHECK(sem_init(&slots, 0, 2) == 0);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        CHECK(pthread_create(&th[i], NULL, user, NULL) == 0);
    for (int i = 0; i < 4; i++)
        CHECK(pthread_join(th[i], NULL) == 0);
    CHECK(sem_getvalue(&slots, &v) == 0);
    printf("counting semaphore: value back to %d, never more than 2 holders\n", v);
    sem_destroy(&slots);
    sem_destroy(&sh->parent_turn);
    sem_destroy(&sh->child_turn);
    return 0;
}
