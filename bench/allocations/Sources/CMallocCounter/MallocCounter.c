// Replaces the allocator's entry points in the executable: the dynamic linker then binds every
// library's calls (Swift's runtime, Foundation, OpenSSL) to these, which count and forward to
// glibc's own implementations. Counting per thread is what separates the gateway's event loops
// from the backend and the client running in the same process.
#define _GNU_SOURCE
#include "CMallocCounter.h"

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>

#if defined(__GLIBC__)

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void __libc_free(void *pointer);
extern void *__libc_memalign(size_t alignment, size_t size);

// initial-exec: the executable's own thread-local storage, reached without calling anything that
// could allocate.
static __thread int marked __attribute__((tls_model("initial-exec")));

static malloc_counts all;
static malloc_counts onMarked;


#define COUNT(field)                                                    \
    do {                                                                \
        __atomic_fetch_add(&all.field, 1, __ATOMIC_RELAXED);            \
        if (marked) __atomic_fetch_add(&onMarked.field, 1, __ATOMIC_RELAXED); \
    } while (0)

void *malloc(size_t size) {
    COUNT(allocations);
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    COUNT(allocations);
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    if (pointer == NULL) {
        COUNT(allocations);
    } else {
        COUNT(reallocations);
    }
    return __libc_realloc(pointer, size);
}

void free(void *pointer) {
    if (pointer != NULL) COUNT(frees);
    __libc_free(pointer);
}

void *memalign(size_t alignment, size_t size) {
    COUNT(allocations);
    return __libc_memalign(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
    COUNT(allocations);
    return __libc_memalign(alignment, size);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
    if (alignment % sizeof(void *) != 0 || (alignment & (alignment - 1)) != 0) return EINVAL;
    COUNT(allocations);
    void *pointer = __libc_memalign(alignment, size);
    if (pointer == NULL) return ENOMEM;
    *result = pointer;
    return 0;
}

static malloc_counts load(malloc_counts *counts) {
    malloc_counts copy;
    copy.allocations = __atomic_load_n(&counts->allocations, __ATOMIC_RELAXED);
    copy.reallocations = __atomic_load_n(&counts->reallocations, __ATOMIC_RELAXED);
    copy.frees = __atomic_load_n(&counts->frees, __ATOMIC_RELAXED);
    return copy;
}

malloc_counts malloc_counts_all(void) { return load(&all); }
malloc_counts malloc_counts_marked(void) { return load(&onMarked); }
void malloc_counter_mark_thread(void) { marked = 1; }

static runtime_counts onRuntime;

#define COUNT_RUNTIME(field) \
    do { if (marked) __atomic_fetch_add(&onRuntime.field, 1, __ATOMIC_RELAXED); } while (0)

// Defined here, these are what the executable's Swift code calls; each counts and forwards to
// libswiftCore's (the next definition in the lookup order).
typedef void (*begin_access_fn)(void *, void *, uintptr_t, void *);
typedef _Bool (*dynamic_cast_fn)(void *, void *, const void *, const void *, uintptr_t);
typedef const void *(*dynamic_cast_class_fn)(const void *, const void *);

// Access sites, by the address the check returns to: an open-addressed table, filled
// only on marked threads while recording (the gateway's one event loop in this harness).
#define SITE_SLOTS 8192
static struct { uintptr_t pc; uint64_t count; } sites[SITE_SLOTS];
static int recordingSites;

static void record_site(uintptr_t pc) {
    uintptr_t slot = (pc >> 2) % SITE_SLOTS;
    for (int probe = 0; probe < SITE_SLOTS; probe++, slot = (slot + 1) % SITE_SLOTS) {
        if (sites[slot].pc == pc || sites[slot].pc == 0) {
            sites[slot].pc = pc;
            sites[slot].count++;
            return;
        }
    }
}

void runtime_counter_record_sites(int enabled) { __atomic_store_n(&recordingSites, enabled, __ATOMIC_SEQ_CST); }

int runtime_counter_sites(uintptr_t *offsets, uint64_t *counts, int capacity) {
    Dl_info info;
    uintptr_t base = dladdr((void *)&runtime_counter_sites, &info) ? (uintptr_t)info.dli_fbase : 0;
    int written = 0;
    // A selection of the largest, `capacity` times: the table is small and this runs once.
    static char taken[SITE_SLOTS];
    for (int round = 0; round < capacity; round++) {
        int best = -1;
        for (int slot = 0; slot < SITE_SLOTS; slot++) {
            if (sites[slot].pc == 0 || taken[slot]) continue;
            if (best < 0 || sites[slot].count > sites[best].count) best = slot;
        }
        if (best < 0) break;
        taken[best] = 1;
        offsets[written] = sites[best].pc - base;
        counts[written] = sites[best].count;
        written++;
    }
    return written;
}

void swift_beginAccess(void *pointer, void *buffer, uintptr_t flags, void *pc) {
    static begin_access_fn real;
    if (real == NULL) real = (begin_access_fn)dlsym(RTLD_NEXT, "swift_beginAccess");
    COUNT_RUNTIME(accesses);
    // The caller: its return address lies in the function that made the access (`pc` is null in
    // optimised code).
    if (marked && recordingSites) record_site((uintptr_t)__builtin_return_address(0));
    real(pointer, buffer, flags, pc);
}

_Bool swift_dynamicCast(void *dest, void *src, const void *srcType, const void *targetType, uintptr_t flags) {
    static dynamic_cast_fn real;
    if (real == NULL) real = (dynamic_cast_fn)dlsym(RTLD_NEXT, "swift_dynamicCast");
    COUNT_RUNTIME(casts);
    return real(dest, src, srcType, targetType, flags);
}

const void *swift_dynamicCastClass(const void *object, const void *targetType) {
    static dynamic_cast_class_fn real;
    if (real == NULL) real = (dynamic_cast_class_fn)dlsym(RTLD_NEXT, "swift_dynamicCastClass");
    COUNT_RUNTIME(casts);
    return real(object, targetType);
}

runtime_counts runtime_counts_marked(void) {
    runtime_counts copy;
    copy.accesses = __atomic_load_n(&onRuntime.accesses, __ATOMIC_RELAXED);
    copy.casts = __atomic_load_n(&onRuntime.casts, __ATOMIC_RELAXED);
    return copy;
}
#endif
