#ifndef C_PORTICO_CURL_H
#define C_PORTICO_CURL_H

#include <curl/curl.h>

// libcurl's setopt/getinfo calls are variadic, which Swift cannot call. These wrappers give each
// argument type its own typed entry point. They add nothing else.

typedef size_t (*portico_curl_data_callback)(char *data, size_t size, size_t count, void *userdata);
typedef int (*portico_curl_debug_callback)(CURL *handle, curl_infotype type, char *data, size_t size, void *userdata);
typedef int (*portico_curl_sockopt_callback)(void *clientp, curl_socket_t socket, curlsocktype purpose);
typedef int (*portico_curl_closesocket_callback)(void *clientp, curl_socket_t socket);
typedef int (*portico_curl_prereq_callback)(void *clientp, char *primary_ip, char *local_ip, int primary_port, int local_port);

CURLcode portico_curl_global_init(void);

CURLcode portico_easy_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode portico_easy_setopt_pointer(CURL *handle, CURLoption option, const void *value);
CURLcode portico_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value);
CURLcode portico_easy_setopt_data_callback(CURL *handle, CURLoption option, portico_curl_data_callback callback);
CURLcode portico_easy_setopt_debug_callback(CURL *handle, CURLoption option, portico_curl_debug_callback callback);
CURLcode portico_easy_setopt_sockopt_callback(CURL *handle, CURLoption option, portico_curl_sockopt_callback callback);
CURLcode portico_easy_setopt_closesocket_callback(CURL *handle, CURLoption option, portico_curl_closesocket_callback callback);
CURLcode portico_easy_setopt_prereq_callback(CURL *handle, CURLoption option, portico_curl_prereq_callback callback);

CURLcode portico_easy_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLcode portico_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value);
CURLcode portico_easy_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value);

CURLMcode portico_multi_setopt_long(CURLM *multi, CURLMoption option, long value);

/// Values of libcurl macros that do not import into Swift.
size_t portico_curl_writefunc_pause(void);
int portico_curlpause_cont(void);

#endif
