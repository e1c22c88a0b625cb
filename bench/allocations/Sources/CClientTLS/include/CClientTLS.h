#ifndef C_CLIENT_TLS_H
#define C_CLIENT_TLS_H

#include <openssl/err.h>
#include <openssl/ssl.h>

#endif
