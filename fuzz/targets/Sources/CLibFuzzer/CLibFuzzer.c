// Only the header matters: this file exists because SwiftPM builds a C target from its sources.
#include "CLibFuzzer.h"
