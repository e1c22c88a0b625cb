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

/// Swift runtime calls made on the marked threads.
typedef struct {
    /// swift_beginAccess: a dynamic exclusivity check.
    uint64_t accesses;
    /// swift_dynamicCast and swift_dynamicCastClass: `as?`, `is`, `as!` the compiler could not
    /// resolve.
    uint64_t casts;
} runtime_counts;

/// Counted by this library's own definitions of those runtime entry points, which the
/// executable's Swift code binds to ahead of libswiftCore's (and which forward to it). Retains and
/// releases are not counted here: libswiftCore's instrumentation hooks crash when replaced on
/// Linux (in the runtime's adapter between the hooks and its entry points); `bench/retains.sh`
/// counts them with uprobes instead.
runtime_counts runtime_counts_marked(void);

/// From now on (or no longer), each exclusivity check on a marked thread also counts under the
/// address of its access site.
void runtime_counter_record_sites(int enabled);

/// The access sites recorded, most frequent first: up to `capacity` of them, as offsets from the
/// executable's load address (for addr2line) and counts; returns how many were written.
int runtime_counter_sites(uintptr_t *offsets, uint64_t *counts, int capacity);

#endif
