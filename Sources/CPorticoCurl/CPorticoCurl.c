#include "CPorticoCurl.h"

CURLcode portico_curl_global_init(void) { return curl_global_init(CURL_GLOBAL_DEFAULT); }

CURLcode portico_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode portico_easy_setopt_pointer(CURL *handle, CURLoption option, const void *value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode portico_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode portico_easy_setopt_data_callback(CURL *handle, CURLoption option, portico_curl_data_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}

CURLcode portico_easy_setopt_debug_callback(CURL *handle, CURLoption option, portico_curl_debug_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}

CURLcode portico_easy_setopt_sockopt_callback(CURL *handle, CURLoption option, portico_curl_sockopt_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}

CURLcode portico_easy_setopt_closesocket_callback(CURL *handle, CURLoption option, portico_curl_closesocket_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}

CURLcode portico_easy_setopt_prereq_callback(CURL *handle, CURLoption option, portico_curl_prereq_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}

CURLcode portico_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

CURLcode portico_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
    return curl_easy_getinfo(handle, info, value);
}

CURLcode portico_easy_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

CURLMcode portico_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

size_t portico_curl_writefunc_pause(void) { return CURL_WRITEFUNC_PAUSE; }

int portico_curlpause_cont(void) { return CURLPAUSE_CONT; }
