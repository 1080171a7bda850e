/* Scheduler guest: classic lock-order inversion.  A takes m1 then m2, B
 * takes m2 then m1, each sleeping 1 ms in between so that both hold their
 * first lock.  Natively this hangs forever; detrun must report a deadlock
 * (exit 123) naming both threads blocked in futex. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static pthread_mutex_t m1 = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t m2 = PTHREAD_MUTEX_INITIALIZER;

static void *thread_a(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m1);
    usleep(1000);
    pthread_mutex_lock(&m2);
    puts("A got both");
    pthread_mutex_unlock(&m2);
    pthread_mutex_unlock(&m1);
    return NULL;
}

static void *thread_b(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m2);
    usleep(1000);
    pthread_mutex_lock(&m1);
    puts("B got both");
    pthread_mutex_unlock(&m1);
    pthread_mutex_unlock(&m2);
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    pthread_create(&a, NULL, thread_a, NULL);
    pthread_create(&b, NULL, thread_b, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    puts("no deadlock");
    return 0;
}
