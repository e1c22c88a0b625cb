#ifndef C_PORTICO_OPENSSL_H
#define C_PORTICO_OPENSSL_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>

// Shims over OpenSSL 3 for what Swift cannot do directly (OSSL_PARAM arrays, one-time fetches).
// Each function is a thin wrapper; the Swift side owns the objects and their lifetimes.

// A keyed HMAC-SHA256 context, initialised once per key; NULL on failure. Free with EVP_MAC_CTX_free.
EVP_MAC_CTX *portico_hmac_sha256_new(const void *key, size_t key_length);

// HMAC-SHA256 of `data` under the key `keyed` was made with; `keyed` is only read (duplicated), so
// several threads may use it at once. Writes 32 bytes to `out`; returns 1 on success.
int portico_hmac_sha256(const EVP_MAC_CTX *keyed, const void *data, size_t length, unsigned char out[32]);

// SHA-256 (bits = 256, 32 bytes out) or SHA-512 (bits = 512, 64 bytes out); returns 1 on success.
int portico_sha(int bits, const void *data, size_t length, unsigned char *out);

#endif
