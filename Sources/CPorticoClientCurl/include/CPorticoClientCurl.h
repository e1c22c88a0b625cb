#ifndef C_PORTICO_CLIENT_CURL_H
#define C_PORTICO_CLIENT_CURL_H

#include <stddef.h>
#include <stdint.h>

// The client library's way to the libcurl that FoundationNetworking already loaded on Linux, used
// only when an app sets a server trust that URLSession cannot honour there (its delegate is never
// offered a server-trust challenge). No curl header is read: libcurl is found at run time with
// dlopen, and the few option and info numbers below are libcurl's stable ABI (checked against the
// real <curl/curl.h> by PorticoClientTests' CurlABITests), written as macros so that Swift reads
// them as Int32. An app builds with no libcurl headers on the machine.

#define PORTICO_CURLOPT_WRITEDATA 10001
#define PORTICO_CURLOPT_ERRORBUFFER 10010
#define PORTICO_CURLOPT_URL 10002
#define PORTICO_CURLOPT_WRITEFUNCTION 20011
#define PORTICO_CURLOPT_HTTPHEADER 10023
#define PORTICO_CURLOPT_HEADERDATA 10029
#define PORTICO_CURLOPT_SSLVERSION 32
#define PORTICO_CURLOPT_CUSTOMREQUEST 10036
#define PORTICO_CURLOPT_NOPROGRESS 43
#define PORTICO_CURLOPT_NOBODY 44
#define PORTICO_CURLOPT_XFERINFODATA 10057
#define PORTICO_CURLOPT_HEADERFUNCTION 20079
#define PORTICO_CURLOPT_CAPATH 10097
#define PORTICO_CURLOPT_NOSIGNAL 99
#define PORTICO_CURLOPT_ACCEPT_ENCODING 10102
#define PORTICO_CURLOPT_POSTFIELDSIZE_LARGE 30120
#define PORTICO_CURLOPT_TIMEOUT_MS 155
#define PORTICO_CURLOPT_CONNECTTIMEOUT_MS 156
#define PORTICO_CURLOPT_COPYPOSTFIELDS 10165
#define PORTICO_CURLOPT_XFERINFOFUNCTION 20219
#define PORTICO_CURLOPT_PINNEDPUBLICKEY 10230
#define PORTICO_CURLOPT_SUPPRESS_CONNECT_HEADERS 265
#define PORTICO_CURLOPT_CAINFO_BLOB 40309
#define PORTICO_CURLOPT_PROTOCOLS_STR 10318

#define PORTICO_CURLINFO_RESPONSE_CODE 2097154 /* CURLINFO_LONG + 2 */
#define PORTICO_CURLINFO_CAINFO 1048637 /* CURLINFO_STRING + 61 */

#define PORTICO_CURL_SSLVERSION_TLSv1_2 6

#define PORTICO_CURLE_OK 0
#define PORTICO_CURLE_COULDNT_RESOLVE_HOST 6
#define PORTICO_CURLE_COULDNT_CONNECT 7
#define PORTICO_CURLE_OPERATION_TIMEDOUT 28
#define PORTICO_CURLE_SSL_CONNECT_ERROR 35
#define PORTICO_CURLE_ABORTED_BY_CALLBACK 42
#define PORTICO_CURLE_GOT_NOTHING 52
#define PORTICO_CURLE_SEND_ERROR 55
#define PORTICO_CURLE_RECV_ERROR 56
#define PORTICO_CURLE_PEER_FAILED_VERIFICATION 60
#define PORTICO_CURLE_SSL_CACERT_BADFILE 77
#define PORTICO_CURLE_SSL_PINNEDPUBKEYNOTMATCH 90

typedef size_t (*portico_client_curl_data_callback)(char *data, size_t size, size_t count, void *userdata);
typedef int (*portico_client_curl_progress_callback)(void *userdata, int64_t download_total, int64_t downloaded,
                                                     int64_t upload_total, int64_t uploaded);

/// Finds libcurl (libcurl.so.4, already mapped by FoundationNetworking) and its entry points; 1 on
/// success. Safe to call from any thread, any number of times.
int portico_client_curl_load(void);

/// 1 when the loaded libcurl lists the `ws` protocol: FoundationNetworking's URLSessionWebSocketTask
/// works only then.
int portico_client_curl_supports_websockets(void);

void *portico_client_curl_easy_init(void);
void portico_client_curl_easy_cleanup(void *handle);
int portico_client_curl_easy_perform(void *handle);
const char *portico_client_curl_easy_strerror(int code);

int portico_client_curl_setopt_long(void *handle, int option, long value);
int portico_client_curl_setopt_off_t(void *handle, int option, int64_t value);
int portico_client_curl_setopt_pointer(void *handle, int option, const void *value);
/// A `struct curl_blob` option, copied by libcurl (CURL_BLOB_COPY).
int portico_client_curl_setopt_blob(void *handle, int option, const void *data, size_t length);
int portico_client_curl_setopt_data_callback(void *handle, int option, portico_client_curl_data_callback callback);
int portico_client_curl_setopt_progress_callback(void *handle, int option, portico_client_curl_progress_callback callback);

int portico_client_curl_getinfo_long(void *handle, int info, long *value);
int portico_client_curl_getinfo_string(void *handle, int info, const char **value);

void *portico_client_curl_slist_append(void *list, const char *string);
void portico_client_curl_slist_free_all(void *list);

#endif
