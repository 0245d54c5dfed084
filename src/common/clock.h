/* Time for measuring and for deadlines: CLOCK_MONOTONIC, which is the same in every
 * process of a machine (token timestamps cross from engine workers to the node). */
#ifndef LLMR_COMMON_CLOCK_H
#define LLMR_COMMON_CLOCK_H

#include <pthread.h>
#include <stdint.h>

uint64_t llmr_now_ns(void);

static inline uint64_t llmr_now_ms(void)
{
    return llmr_now_ns() / 1000000u;
}

/* Sleeps for ms milliseconds (through signals). */
void llmr_sleep_ms(uint64_t ms);

/* Initializes c for deadlines on CLOCK_MONOTONIC (pthread_cond_timedwait's absolute
 * times then come from clock_gettime(CLOCK_MONOTONIC)): 0, or pthread's error. */
int llmr_cond_init_monotonic(pthread_cond_t *c);

#endif
