/*
 * membw.h: the machine's memory read bandwidth, measured the way a decode step reads weights:
 * every thread streams its own contiguous slice of a buffer far larger than the caches, with
 * vector loads, pass after pass. `synapse bench` measures it in the same run as the speeds it
 * compares with it, because the host's other load moves it.
 */
#ifndef SYNAPSE_TOOL_MEMBW_H
#define SYNAPSE_TOOL_MEMBW_H

#include <stddef.h>
#include <stdint.h>

typedef struct membw_buffer membw_buffer;

/* Allocates and writes (so that every page is resident) a buffer of bytes (a multiple of 4096,
 * at least 1 MiB). Returns the exit code (EXIT_OK, or EXIT_RUNTIME with the error printed). */
int membw_new(size_t bytes, membw_buffer **out);
void membw_free(membw_buffer *b);

size_t membw_bytes(const membw_buffer *b);
/* Bytes of the buffer held in 2 MiB pages (0 where the kernel gave none). */
size_t membw_huge_page_bytes(const membw_buffer *b);

/* Reads the whole buffer n_passes times with n_threads threads (each its own 1/n_threads slice)
 * and stores each pass's rate in pass_gb_per_s[0 .. n_passes) (1e9 bytes per second). Returns
 * the exit code. */
int membw_measure(membw_buffer *b, int32_t n_threads, int32_t n_passes, double *pass_gb_per_s);

#endif
