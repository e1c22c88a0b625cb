#ifndef C_PORTICO_CODECS_H
#define C_PORTICO_CODECS_H

// The system's brotli encoder (Debian: libbrotli-dev) and zstd (libzstd-dev), for response
// compression. Their headers are plain C that Swift imports as they are; this module only names
// them and links the libraries. gzip goes through compress-nio (zlib).
#include <brotli/encode.h>
#include <zstd.h>

#endif
