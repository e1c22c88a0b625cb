#ifndef C_PORTICO_OPENSSL_H
#define C_PORTICO_OPENSSL_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/sha.h>

// Shims over OpenSSL 3 for what Swift cannot do directly (OSSL_PARAM arrays, one-time fetches).
// Each function is a thin wrapper; the Swift side owns the objects and their lifetimes.

// HMAC-SHA256 (RFC 2104) under one key: the SHA-256 states after the key's inner and outer pad
// blocks. A MAC copies the two states onto the stack and hashes the message and the inner digest,
// so it allocates nothing and takes no lock, and one key serves every thread at once (it is only
// read). OpenSSL's EVP_MAC instead duplicates a context, three digest contexts inside it, per MAC.
typedef struct portico_hmac_sha256_key {
    SHA256_CTX inner;
    SHA256_CTX outer;
} portico_hmac_sha256_key;

// Absorbs `secret` (hashed first when longer than a block, as RFC 2104 says); returns 1 on success.
int portico_hmac_sha256_key_init(portico_hmac_sha256_key *key, const void *secret, size_t length);

// Writes the 32-byte MAC of `data` under `key` to `out`; returns 1 on success.
int portico_hmac_sha256(const portico_hmac_sha256_key *key, const void *data, size_t length, unsigned char out[32]);

// Overwrites the key's state, so that no trace of the secret stays in freed memory.
void portico_hmac_sha256_key_clear(portico_hmac_sha256_key *key);

// SHA-256 (bits = 256, 32 bytes out) or SHA-512 (bits = 512, 64 bytes out); returns 1 on success.
int portico_sha(int bits, const void *data, size_t length, unsigned char *out);

// MARK: TLS (OpenSSL macros as functions, and the callbacks that need no Swift)

// The protocols a server context offers through ALPN, combined with `|`.
#define PORTICO_ALPN_HTTP11 1
#define PORTICO_ALPN_H2 2

// A server context: TLS 1.2 minimum (or 1.3 with min_version = 13), auto-retry, no renegotiation,
// no compression, the server's cipher preference, ALPN choosing among `protocols` (h2 first when
// both). NULL on failure.
SSL_CTX *portico_tls_server_context_new(int min_version, int protocols);

// A client context (for the tests' TLS clients): TLS versions bounded by min/max (11, 12, 13; 0 for no bound).
SSL_CTX *portico_tls_client_context_new(int min_version, int max_version);

int portico_tls_ctx_set_groups(SSL_CTX *context, const char *groups);
void portico_tls_ctx_set_servername_callback(SSL_CTX *context, int (*callback)(SSL *, int *, void *), void *argument);
// Client certificates checked against `ca_file`; `required` fails handshakes without one.
int portico_tls_ctx_verify_clients(SSL_CTX *context, const char *ca_file, int required);
// Seconds from now until the context's certificate becomes valid (positive: not yet valid) and
// until it expires (negative: expired). Returns 1 on success.
int portico_tls_ctx_certificate_validity(SSL_CTX *context, long *until_valid, long *until_expiry);
// Gives `to` the session-ticket keys of `from`, so tickets issued under one context resume under
// the other (after a certificate reload). Returns 1 on success.
int portico_tls_ctx_copy_ticket_keys(SSL_CTX *from, SSL_CTX *to);

// A memory BIO that reports "retry" rather than EOF when empty, as a non-blocking socket would.
BIO *portico_tls_memory_bio(void);
// Gives back the storage of an empty memory BIO whose buffer has grown past `keep` bytes: a memory
// BIO never shrinks, so without this a connection would hold the largest burst it ever carried for
// as long as it stays open. Returns 1 when it was given back.
int portico_tls_memory_bio_trim(BIO *bio, size_t keep);
// The bytes of storage a memory BIO holds (what it has grown to, read or not).
size_t portico_tls_memory_bio_capacity(BIO *bio);
// The SNI name a client sends (tests).
int portico_tls_set_host_name(SSL *ssl, const char *name);

// The peer certificate's subject in RFC 2253 form, written to `out` (NUL-terminated); the length,
// 0 when there is no certificate, -1 on error.
int portico_tls_peer_subject(SSL *ssl, char *out, size_t capacity);
// Whether the context's certificate is valid for `host` (RFC 6125 matching, wildcards included).
int portico_tls_ctx_certificate_matches(SSL_CTX *context, const char *host);

#endif
