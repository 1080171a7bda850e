/* selfkill.c - print "before", then SIGKILL ourselves.  "after" must never
 * appear; the expected exit is "killed by signal 9". */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

int main(void)
{
    printf("before\n");
    fflush(stdout);
    kill(getpid(), SIGKILL);
    printf("after\n");
    fflush(stdout);
    return 0;
}
