// The low-level SHA-256 calls below are deprecated, not removed, in OpenSSL 3 (see the HMAC key).
#define OPENSSL_SUPPRESS_DEPRECATED
#include "CPorticoOpenSSL.h"

#include <openssl/core_names.h>
#include <openssl/params.h>
#include <pthread.h>
#include <string.h>

// SHA256_Init and its siblings are deprecated in OpenSSL 3 in favour of EVP, but EVP cannot copy a
// digest state without allocating, and a per-key midstate copied on the stack is what makes a MAC
// cheap (see portico_hmac_sha256_key in the header). They remain part of OpenSSL 3's API.
#define PORTICO_SHA256_BLOCK 64

int portico_hmac_sha256_key_init(portico_hmac_sha256_key *key, const void *secret, size_t length) {
    unsigned char block[PORTICO_SHA256_BLOCK] = {0};
    if (length > PORTICO_SHA256_BLOCK) {
        if (SHA256(secret, length, block) == NULL) return 0;
    } else if (length > 0) {
        memcpy(block, secret, length);
    }
    unsigned char pad[PORTICO_SHA256_BLOCK];
    int ok = 1;
    for (int i = 0; i < PORTICO_SHA256_BLOCK; i++) pad[i] = block[i] ^ 0x36;
    ok &= SHA256_Init(&key->inner) == 1 && SHA256_Update(&key->inner, pad, sizeof pad) == 1;
    for (int i = 0; i < PORTICO_SHA256_BLOCK; i++) pad[i] = block[i] ^ 0x5c;
    ok &= SHA256_Init(&key->outer) == 1 && SHA256_Update(&key->outer, pad, sizeof pad) == 1;
    OPENSSL_cleanse(block, sizeof block);
    OPENSSL_cleanse(pad, sizeof pad);
    return ok;
}

int portico_hmac_sha256(const portico_hmac_sha256_key *key, const void *data, size_t length, unsigned char out[32]) {
    SHA256_CTX context = key->inner;
    unsigned char inner[SHA256_DIGEST_LENGTH];
    int ok = SHA256_Update(&context, data, length) == 1 && SHA256_Final(inner, &context) == 1;
    context = key->outer;
    ok = ok && SHA256_Update(&context, inner, sizeof inner) == 1 && SHA256_Final(out, &context) == 1;
    OPENSSL_cleanse(&context, sizeof context);
    return ok;
}

void portico_hmac_sha256_key_clear(portico_hmac_sha256_key *key) {
    OPENSSL_cleanse(key, sizeof *key);
}

// The one-shot SHA256() and SHA512() of OpenSSL 3 fetch the algorithm from the provider store on
// every call; the low-level contexts do not, and need no allocation.
int portico_sha(int bits, const void *data, size_t length, unsigned char *out) {
    switch (bits) {
    case 256: {
        SHA256_CTX context;
        return SHA256_Init(&context) == 1 && SHA256_Update(&context, data, length) == 1 && SHA256_Final(out, &context) == 1;
    }
    case 512: {
        SHA512_CTX context;
        return SHA512_Init(&context) == 1 && SHA512_Update(&context, data, length) == 1 && SHA512_Final(out, &context) == 1;
    }
    default: return 0;
    }
}

// MARK: TLS

// ALPN lists in the wire format, the server's preference first. The callback's argument points to
// one of these constants, so it outlives every context.
static const unsigned char alpn_h2_http11[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
static const unsigned char alpn_http11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
static const unsigned char alpn_h2[] = {2, 'h', '2'};

struct alpn_list {
    const unsigned char *bytes;
    unsigned int length;
};
static const struct alpn_list alpn_lists[] = {
    {alpn_http11, sizeof(alpn_http11)},
    {alpn_h2, sizeof(alpn_h2)},
    {alpn_h2_http11, sizeof(alpn_h2_http11)},
};

// ALPN: the first of the listener's protocols the client also offers. With no overlap, carry on
// without ALPN rather than failing the handshake: the connection then speaks HTTP/1.1 (RFC 7301
// allows either; curl without ALPN, and every HTTP/1.1-only client, expect this).
static int select_protocol(SSL *ssl, const unsigned char **out, unsigned char *out_length, const unsigned char *in,
                           unsigned int in_length, void *argument) {
    (void)ssl;
    const struct alpn_list *list = argument;
    unsigned char *selected = NULL;
    if (SSL_select_next_proto(&selected, out_length, list->bytes, list->length, in, in_length) == OPENSSL_NPN_NEGOTIATED) {
        *out = selected;
        return SSL_TLSEXT_ERR_OK;
    }
    return SSL_TLSEXT_ERR_NOACK;
}

static int protocol_version(int version) {
    switch (version) {
    case 11: return TLS1_1_VERSION;  // clients only: tests check that servers refuse it
    case 12: return TLS1_2_VERSION;
    case 13: return TLS1_3_VERSION;
    default: return 0;
    }
}

SSL_CTX *portico_tls_server_context_new(int min_version, int protocols) {
    if (protocols < PORTICO_ALPN_HTTP11 || protocols > (PORTICO_ALPN_HTTP11 | PORTICO_ALPN_H2)) return NULL;
    SSL_CTX *context = SSL_CTX_new(TLS_server_method());
    if (context == NULL) return NULL;
    int version = protocol_version(min_version);
    if (version < TLS1_2_VERSION || SSL_CTX_set_min_proto_version(context, version) != 1) {
        SSL_CTX_free(context);
        return NULL;
    }
    // Release the record buffers of idle connections: a keep-alive connection waiting for its
    // next request then holds no 16 KiB read and write buffers.
    SSL_CTX_set_mode(context, SSL_MODE_AUTO_RETRY | SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_options(context, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_session_cache_mode(context, SSL_SESS_CACHE_SERVER);
    static const unsigned char session_context[] = "portico";
    SSL_CTX_set_session_id_context(context, session_context, sizeof(session_context) - 1);
    SSL_CTX_set_alpn_select_cb(context, select_protocol, (void *)&alpn_lists[protocols - 1]);
    return context;
}

SSL_CTX *portico_tls_client_context_new(int min_version, int max_version) {
    SSL_CTX *context = SSL_CTX_new(TLS_client_method());
    if (context == NULL) return NULL;
    SSL_CTX_set_mode(context, SSL_MODE_AUTO_RETRY | SSL_MODE_RELEASE_BUFFERS);
    if (min_version != 0 && SSL_CTX_set_min_proto_version(context, protocol_version(min_version)) != 1) goto fail;
    if (max_version != 0 && SSL_CTX_set_max_proto_version(context, protocol_version(max_version)) != 1) goto fail;
    return context;
fail:
    SSL_CTX_free(context);
    return NULL;
}

int portico_tls_ctx_set_groups(SSL_CTX *context, const char *groups) {
    return (int)SSL_CTX_set1_groups_list(context, groups);
}

void portico_tls_ctx_set_servername_callback(SSL_CTX *context, int (*callback)(SSL *, int *, void *), void *argument) {
    SSL_CTX_set_tlsext_servername_callback(context, callback);
    SSL_CTX_set_tlsext_servername_arg(context, argument);
}

int portico_tls_ctx_verify_clients(SSL_CTX *context, const char *ca_file, int required) {
    if (SSL_CTX_load_verify_locations(context, ca_file, NULL) != 1) return 0;
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(ca_file);
    if (names == NULL) return 0;
    SSL_CTX_set_client_CA_list(context, names);
    SSL_CTX_set_verify(context, SSL_VERIFY_PEER | (required ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0), NULL);
    return 1;
}

static int seconds_until(const ASN1_TIME *time, long *seconds) {
    int days = 0, secs = 0;
    if (ASN1_TIME_diff(&days, &secs, NULL, time) != 1) return 0;
    *seconds = (long)days * 86400 + secs;
    return 1;
}

int portico_tls_ctx_certificate_validity(SSL_CTX *context, long *until_valid, long *until_expiry) {
    X509 *certificate = SSL_CTX_get0_certificate(context);
    if (certificate == NULL) return 0;
    return seconds_until(X509_get0_notBefore(certificate), until_valid)
        && seconds_until(X509_get0_notAfter(certificate), until_expiry);
}

int portico_tls_ctx_copy_ticket_keys(SSL_CTX *from, SSL_CTX *to) {
    unsigned char keys[80];  // name, HMAC secret, AES key: 16 + 32 + 32 bytes
    if (SSL_CTX_get_tlsext_ticket_keys(from, keys, sizeof(keys)) != 1) return 0;
    int ok = SSL_CTX_set_tlsext_ticket_keys(to, keys, sizeof(keys)) == 1;
    OPENSSL_cleanse(keys, sizeof(keys));
    return ok;
}

BIO *portico_tls_memory_bio(void) {
    BIO *bio = BIO_new(BIO_s_mem());
    if (bio != NULL) BIO_set_mem_eof_return(bio, -1);
    return bio;
}

int portico_tls_memory_bio_trim(BIO *bio, size_t keep) {
    BUF_MEM *memory = NULL;
    // BIO_get_mem_ptr first moves unread bytes to the front, so `length` is what is unread.
    if (BIO_get_mem_ptr(bio, &memory) != 1 || memory == NULL) return 0;
    if (memory->length != 0 || memory->max <= keep) return 0;
    BUF_MEM *fresh = BUF_MEM_new();
    if (fresh == NULL) return 0;
    // The BIO lets go of the old buffer without freeing it (NOCLOSE while it is swapped), owns the
    // new one, and keeps its other settings, such as the "retry when empty" of
    // portico_tls_memory_bio. The old one is freed here, without BUF_MEM_free's wipe: it held
    // ciphertext, no secret, and wiping it would cost a pass over every byte it grew to.
    (void)BIO_set_close(bio, BIO_NOCLOSE);
    if (BIO_set_mem_buf(bio, fresh, BIO_CLOSE) != 1) {
        (void)BIO_set_close(bio, BIO_CLOSE);
        BUF_MEM_free(fresh);
        return 0;
    }
    OPENSSL_free(memory->data);
    OPENSSL_free(memory);
    return 1;
}

size_t portico_tls_memory_bio_capacity(BIO *bio) {
    BUF_MEM *memory = NULL;
    if (BIO_get_mem_ptr(bio, &memory) != 1 || memory == NULL) return 0;
    return memory->max;
}

int portico_tls_set_host_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

int portico_tls_peer_subject(SSL *ssl, char *out, size_t capacity) {
    X509 *certificate = SSL_get0_peer_certificate(ssl);
    if (certificate == NULL) return 0;
    BIO *bio = BIO_new(BIO_s_mem());
    if (bio == NULL) return -1;
    int result = -1;
    if (X509_NAME_print_ex(bio, X509_get_subject_name(certificate), 0, XN_FLAG_RFC2253) >= 0) {
        int length = BIO_read(bio, out, (int)(capacity > 0 ? capacity - 1 : 0));
        if (length >= 0) {
            out[length] = 0;
            result = length;
        }
    }
    BIO_free(bio);
    return result;
}

int portico_tls_ctx_certificate_matches(SSL_CTX *context, const char *host) {
    X509 *certificate = SSL_CTX_get0_certificate(context);
    if (certificate == NULL) return 0;
    return X509_check_host(certificate, host, 0, 0, NULL) == 1;
}
