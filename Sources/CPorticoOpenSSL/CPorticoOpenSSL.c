#include "CPorticoOpenSSL.h"

#include <openssl/core_names.h>
#include <openssl/params.h>
#include <pthread.h>

// Fetching an algorithm looks it up in the provider store, under a lock; do it once per process.
static pthread_once_t fetch_once = PTHREAD_ONCE_INIT;
static EVP_MAC *hmac;
static EVP_MD *sha256;
static EVP_MD *sha512;

static void fetch_algorithms(void) {
    hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    sha512 = EVP_MD_fetch(NULL, "SHA512", NULL);
}

EVP_MAC_CTX *portico_hmac_sha256_new(const void *key, size_t key_length) {
    pthread_once(&fetch_once, fetch_algorithms);
    if (hmac == NULL) return NULL;
    EVP_MAC_CTX *context = EVP_MAC_CTX_new(hmac);
    if (context == NULL) return NULL;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0),
        OSSL_PARAM_construct_end(),
    };
    if (EVP_MAC_init(context, key, key_length, params) != 1) {
        EVP_MAC_CTX_free(context);
        return NULL;
    }
    return context;
}

int portico_hmac_sha256(const EVP_MAC_CTX *keyed, const void *data, size_t length, unsigned char out[32]) {
    EVP_MAC_CTX *context = EVP_MAC_CTX_dup(keyed);
    if (context == NULL) return 0;
    size_t written = 0;
    int ok = EVP_MAC_update(context, data, length) == 1 && EVP_MAC_final(context, out, &written, 32) == 1 && written == 32;
    EVP_MAC_CTX_free(context);
    return ok;
}

int portico_sha(int bits, const void *data, size_t length, unsigned char *out) {
    pthread_once(&fetch_once, fetch_algorithms);
    const EVP_MD *md = bits == 512 ? sha512 : bits == 256 ? sha256 : NULL;
    if (md == NULL) return 0;
    return EVP_Digest(data, length, out, NULL, md, NULL);
}
