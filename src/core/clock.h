/* clock.h: the library's monotonic clock, for the durations it reports (request and step times). */
#ifndef SYN_CORE_CLOCK_H
#define SYN_CORE_CLOCK_H

/* Milliseconds on CLOCK_MONOTONIC, from an arbitrary origin: only differences mean anything. */
double syn_now_ms(void);

#endif
