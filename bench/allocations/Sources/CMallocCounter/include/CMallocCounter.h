#ifndef C_MALLOC_COUNTER_H
#define C_MALLOC_COUNTER_H

#include <stdint.h>

/// Allocation events since the process started.
typedef struct {
    /// malloc, calloc, realloc of NULL, and the aligned allocators.
    uint64_t allocations;
    /// realloc of an existing block (a buffer growing).
    uint64_t reallocations;
    uint64_t frees;
} malloc_counts;

/// Every thread of the process.
malloc_counts malloc_counts_all(void);

/// Only the threads that called `malloc_counter_mark_thread`.
malloc_counts malloc_counts_marked(void);

/// From now on, this thread's allocations also count in `malloc_counts_marked`.
void malloc_counter_mark_thread(void);

#endif
