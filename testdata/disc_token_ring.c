/* disc_token_ring: a token ring whose "skip finished threads" shortcut
 * races.  Four threads take turns: each waits (sched_yield spin) until
 * token % 4 == its id, takes the turn, and passes the token (token + 1).
 * The threads have different amounts of work, so a waiter that sees the
 * token parked at a thread that has finished moves it on.  That skip is a
 * plain read-then-write: a waiter stopped between reading token and writing
 * token + 1 (no syscall in between) writes back a stale value after the
 * ring has moved on, and a turn is handed out a second time -- possibly
 * while another thread still holds the token.  Prints "BUG: turn T taken
 * twice ..." or "BUG: threads X and Y hold the token together" on stderr
 * and exits 1.  Otherwise exits 0. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#define NT 4

static const int jobs[NT] = {20, 12, 16, 8};
static volatile int token;
static volatile int finished[NT];
static volatile int holder = -1;
static volatile int last_turn = -1;
static unsigned long acc[NT];

static void wait_for_token(int id)
{
    while (token % NT != id) {
        int t = token;
        if (finished[t % NT])
            token = t + 1; /* skip a thread that has left the ring */
        sched_yield();
    }
}

static void *member(void *arg)
{
    int id = (int)(long)arg;
    for (int j = 0; j < jobs[id]; j++) {
        wait_for_token(id);
        int turn = token;
        if (holder != -1) {
            fprintf(stderr, "BUG: threads %d and %d hold the token together\n", holder, id);
            exit(1);
        }
        if (turn <= last_turn) {
            fprintf(stderr, "BUG: turn %d taken twice (thread %d, after turn %d)\n",
                    turn, id, last_turn);
            exit(1);
        }
        holder = id;
        last_turn = turn;
        unsigned long h = acc[id] + (unsigned long)j;
        for (int i = 0; i < 16; i++)
            h = h * 6364136223846793005ul + 1442695040888963407ul;
        acc[id] = h;
        holder = -1;
        token = turn + 1;
    }
    finished[id] = 1;
    return NULL;
}

int main(void)
{
    pthread_t t[NT];
    for (long i = 0; i < NT; i++)
        if (pthread_create(&t[i], NULL, member, (void *)i) != 0) {
            perror("pthread_create");
            return 2;
        }
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    printf("ok token=%d acc=%lx\n", token, acc[0] ^ acc[1] ^ acc[2] ^ acc[3]);
    return 0;
}
