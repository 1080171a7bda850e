/* conf_alarm_handler: alarm(1) + pause() with a SIGALRM handler: pause
 * returns -1/EINTR after the handler ran exactly once; alarm() returns the
 * previous alarm's remaining time and alarm(0) cancels. Takes ~1 s natively. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s (errno %d)\n", __FILE__, \
                    __LINE__, #c, errno);                                     \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
    (void)sig;
    alarms++;
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGALRM, &sa, NULL) == 0);

    printf("alarm with none pending returns %u\n", alarm(0));
    alarm(100);
    unsigned left = alarm(0);
    printf("alarm(0) after alarm(100): cancelled one with time left=%s\n",
           left > 0 && left <= 100 ? "yes" : "no");

    printf("alarm(1) returns %u\n", alarm(1));
    errno = 0;
    int r = pause();
    int e = errno;
    printf("pause returned %d %s, handler ran %d time(s)\n", r, e == EINTR ? "EINTR" : "?",
           alarms);
    printf("alarm after it fired returns %u\n", alarm(0));
    return 0;
}
