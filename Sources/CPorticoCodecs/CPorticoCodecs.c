// The module is the header's: nothing to compile beyond it.
#include "CPorticoCodecs.h"
