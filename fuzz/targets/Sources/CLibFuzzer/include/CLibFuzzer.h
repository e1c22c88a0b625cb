#ifndef C_LIB_FUZZER_H
#define C_LIB_FUZZER_H

#include <stddef.h>
#include <stdint.h>

/// libFuzzer's driver, which its own `main` calls (see llvm.org/docs/LibFuzzer.html, "Using
/// libFuzzer as a library"). Defined by the runtime that `-sanitize=fuzzer` links in.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
