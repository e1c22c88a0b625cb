// The benchmark's TLS client calls OpenSSL directly; this target only brings its headers and
// libraries in.
#include "CClientTLS.h"
