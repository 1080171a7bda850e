/* Race guest (hunt): use after free between two threads.
 *
 * The reader checks the `freed` marker, yields (a sched_yield syscall)
 * and then reads a field of the shared object.  The owner yields too,
 * does some syscall-free work, yields again, then poisons the object
 * with 0xdd, frees it and sets the marker.  If the owner frees inside the reader's window, the reader reads the poison (the field
 * sits past the allocator's free-list words, so the poison survives
 * free()) and the program exits 1.
 *
 * Under detrun's default schedule (run a thread until it blocks or
 * yields, then round-robin in creation order) the reader gets the turn
 * back after the owner's yield, so it reads the live object and the
 * default run passes; natively the owner's syscall-free work makes it much
 * later than the reader.  Chaos seeds that run the owner to its free while
 * the reader is in its window fail. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct object {
    void *link[4]; /* allocator metadata lands here after free() */
    unsigned int value;
    char pad[28];
};

#define POISON 0xddddddddu

static struct object *obj;
static volatile int freed;
static volatile unsigned int seen;

static void *reader(void *arg)
{
    (void)arg;
    if (!freed) {
        sched_yield(); /* syscall in the window */
        seen = ((volatile struct object *)obj)->value;
        if (seen == POISON) {
            fprintf(stderr, "race_uaf: reader read freed memory (value 0x%x)\n", seen);
            exit(1);
        }
    }
    return NULL;
}

/* Through a volatile pointer, so the compiler cannot drop the stores to
 * memory that is about to be freed. */
static void poison(struct object *o)
{
    volatile unsigned char *p = (volatile unsigned char *)o;
    for (size_t i = 0; i < sizeof *o; i++)
        p[i] = 0xdd;
}

static void *owner(void *arg)
{
    (void)arg;
    sched_yield(); /* syscall before the free */
    for (volatile int i = 0; i < 1000000; i++)
        ;
    sched_yield(); /* natively: give the other thread a CPU back */
    poison(obj);
    free(obj);
    freed = 1;
    return NULL;
}

int main(void)
{
    obj = malloc(sizeof *obj);
    if (!obj) {
        perror("malloc");
        return 2;
    }
    memset(obj, 0, sizeof *obj);
    obj->value = 42;
    pthread_t r, o;
    if (pthread_create(&r, NULL, reader, NULL) != 0 ||
        pthread_create(&o, NULL, owner, NULL) != 0) {
        perror("pthread_create");
        return 2;
    }
    pthread_join(r, NULL);
    pthread_join(o, NULL);
    printf("reader saw %u\n", seen);
    return 0;
}
