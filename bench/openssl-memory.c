// What OpenSSL itself keeps for one idle server connection, with Portico's settings (memory BIOs,
// SSL_MODE_RELEASE_BUFFERS): the floor under bench/tls-idle-memory.sh's figure that no code above
// OpenSSL can remove. Server and client run in one process over memory BIOs; only the allocations
// the server side's calls make are counted (mallinfo2's bytes in use, before and after each call),
// split by phase, after a handshake and one small request and response.
//
//   bench/openssl-memory.sh [connections]     (builds and runs this on a fresh development certificate)
#include <malloc.h>
#include <openssl/buffer.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long in_use(void) { return (long)mallinfo2().uordblks; }

static void carry(BIO *from, BIO *to) {
    char chunk[65536];
    int count;
    while ((count = BIO_read(from, chunk, sizeof chunk)) > 0) BIO_write(to, chunk, count);
}

static BIO *memory_bio(void) {
    BIO *bio = BIO_new(BIO_s_mem());
    BIO_set_mem_eof_return(bio, -1);
    return bio;
}

// Runs `call` and adds what it left allocated to `*total`.
#define COUNTED(total, call) do { long before = in_use(); call; *(total) += in_use() - before; } while (0)

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s certificate.pem key.pem [connections]\n", argv[0]);
        return 2;
    }
    int count = argc > 3 ? atoi(argv[3]) : 1000;
    SSL_CTX *server = SSL_CTX_new(TLS_server_method());
    SSL_CTX_set_mode(server, SSL_MODE_AUTO_RETRY | SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_options(server, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_session_cache_mode(server, SSL_SESS_CACHE_SERVER);
    if (SSL_CTX_use_certificate_chain_file(server, argv[1]) != 1 || SSL_CTX_use_PrivateKey_file(server, argv[2], SSL_FILETYPE_PEM) != 1) {
        fprintf(stderr, "cannot load the certificate or key\n");
        return 1;
    }
    SSL_CTX *client = SSL_CTX_new(TLS_client_method());
    SSL **kept = calloc((size_t)count, sizeof *kept);
    long made = 0, handshake = 0, exchange = 0, storage = 0, unattributed = 0;
    char request[] = "GET /echo/x HTTP/1.1\r\nHost: localhost\r\n\r\n", response[300], chunk[4096];
    memset(response, 'x', sizeof response);
    for (int index = 0; index < count; index++) {
        SSL *ssl;
        BIO *in, *out;
        COUNTED(&made, (ssl = SSL_new(server), in = memory_bio(), out = memory_bio(), SSL_set_bio(ssl, in, out), SSL_set_accept_state(ssl)));
        SSL *peer = SSL_new(client);
        BIO *peer_in = memory_bio(), *peer_out = memory_bio();
        SSL_set_bio(peer, peer_in, peer_out);
        SSL_set_connect_state(peer);
        for (int round = 0; round < 10 && !(SSL_is_init_finished(ssl) && SSL_is_init_finished(peer)); round++) {
            SSL_do_handshake(peer);
            COUNTED(&unattributed, carry(peer_out, in));
            COUNTED(&handshake, SSL_do_handshake(ssl));
            carry(out, peer_in);
        }
        SSL_write(peer, request, sizeof request - 1);
        COUNTED(&unattributed, carry(peer_out, in));
        COUNTED(&exchange, (SSL_read(ssl, chunk, sizeof chunk), SSL_write(ssl, response, sizeof response)));
        carry(out, peer_in);
        if (SSL_read(peer, chunk, sizeof chunk) <= 0) {
            fprintf(stderr, "the exchange failed\n");
            return 1;
        }
        SSL_free(peer);
        BUF_MEM *memory;
        BIO_get_mem_ptr(in, &memory);
        storage += (long)memory->max;
        BIO_get_mem_ptr(out, &memory);
        storage += (long)memory->max;
        kept[index] = ssl;
    }
    printf("OpenSSL %s, %d idle server connections (TLS 1.3, memory BIOs, released record buffers), bytes each:\n",
           OpenSSL_version(OPENSSL_VERSION_STRING), count);
    printf("  SSL_new and two memory BIOs   %6.0f\n", (double)made / count);
    printf("  kept from the handshake        %6.0f\n", (double)handshake / count);
    printf("  kept from one small exchange   %6.0f\n", (double)exchange / count);
    printf("  in all                         %6.0f (%.1f KiB)\n", (double)(made + handshake + unattributed + exchange) / count,
           (double)(made + handshake + unattributed + exchange) / count / 1024);
    printf("  of which the BIOs' storage     %6.0f\n", (double)storage / count);
    for (int index = 0; index < count; index++) SSL_free(kept[index]);
    return 0;
}
