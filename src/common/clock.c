/* Monotonic time: see clock.h. */
#include "common/clock.h"

#include <errno.h>
#include <time.h>

uint64_t llmr_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int llmr_cond_init_monotonic(pthread_cond_t *c)
{
    pthread_condattr_t attr;
    int e = pthread_condattr_init(&attr);
    if (e != 0)
        return e;
    e = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (e == 0)
        e = pthread_cond_init(c, &attr);
    pthread_condattr_destroy(&attr);
    return e;
}

void llmr_sleep_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000u), (long)(ms % 1000u) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}
