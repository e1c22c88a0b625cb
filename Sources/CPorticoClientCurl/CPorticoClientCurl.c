#include "CPorticoClientCurl.h"

#if defined(__linux__)
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

// libcurl's prototypes, written out: the variadic ones are called through variadic pointers so the
// calling convention is the one libcurl was compiled for.
typedef void *(*easy_init_fn)(void);
typedef void (*easy_cleanup_fn)(void *);
typedef int (*easy_perform_fn)(void *);
typedef const char *(*easy_strerror_fn)(int);
typedef int (*easy_setopt_fn)(void *, int, ...);
typedef int (*easy_getinfo_fn)(void *, int, ...);
typedef void *(*slist_append_fn)(void *, const char *);
typedef void (*slist_free_all_fn)(void *);

// The first members of libcurl's curl_version_info_data, unchanged since its first age.
struct portico_curl_version_info {
    int age;
    const char *version;
    unsigned int version_num;
    const char *host;
    int features;
    const char *ssl_version;
    long ssl_version_num;
    const char *libz_version;
    const char *const *protocols;
};
typedef struct portico_curl_version_info *(*version_info_fn)(int);

struct portico_curl_blob {
    void *data;
    size_t len;
    unsigned int flags;
};

static struct {
    easy_init_fn easy_init;
    easy_cleanup_fn easy_cleanup;
    easy_perform_fn easy_perform;
    easy_strerror_fn easy_strerror;
    easy_setopt_fn easy_setopt;
    easy_getinfo_fn easy_getinfo;
    slist_append_fn slist_append;
    slist_free_all_fn slist_free_all;
    version_info_fn version_info;
    int loaded;
} curl;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void) {
    void *library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) return;
    curl.easy_init = (easy_init_fn)dlsym(library, "curl_easy_init");
    curl.easy_cleanup = (easy_cleanup_fn)dlsym(library, "curl_easy_cleanup");
    curl.easy_perform = (easy_perform_fn)dlsym(library, "curl_easy_perform");
    curl.easy_strerror = (easy_strerror_fn)dlsym(library, "curl_easy_strerror");
    curl.easy_setopt = (easy_setopt_fn)dlsym(library, "curl_easy_setopt");
    curl.easy_getinfo = (easy_getinfo_fn)dlsym(library, "curl_easy_getinfo");
    curl.slist_append = (slist_append_fn)dlsym(library, "curl_slist_append");
    curl.slist_free_all = (slist_free_all_fn)dlsym(library, "curl_slist_free_all");
    curl.version_info = (version_info_fn)dlsym(library, "curl_version_info");
    curl.loaded = curl.easy_init && curl.easy_cleanup && curl.easy_perform && curl.easy_strerror && curl.easy_setopt &&
                  curl.easy_getinfo && curl.slist_append && curl.slist_free_all;
}

int portico_client_curl_load(void) {
    pthread_once(&load_once, load);
    return curl.loaded;
}

int portico_client_curl_supports_websockets(void) {
    if (!portico_client_curl_load() || curl.version_info == NULL) return 0;
    struct portico_curl_version_info *info = curl.version_info(0 /* CURLVERSION_FIRST */);
    if (info == NULL || info->protocols == NULL) return 0;
    for (const char *const *protocol = info->protocols; *protocol != NULL; protocol++) {
        if (strcmp(*protocol, "ws") == 0) return 1;
    }
    return 0;
}

void *portico_client_curl_easy_init(void) { return portico_client_curl_load() ? curl.easy_init() : NULL; }
void portico_client_curl_easy_cleanup(void *handle) { curl.easy_cleanup(handle); }
int portico_client_curl_easy_perform(void *handle) { return curl.easy_perform(handle); }
const char *portico_client_curl_easy_strerror(int code) {
    return portico_client_curl_load() ? curl.easy_strerror(code) : "libcurl could not be loaded";
}

int portico_client_curl_setopt_long(void *handle, int option, long value) { return curl.easy_setopt(handle, option, value); }
int portico_client_curl_setopt_off_t(void *handle, int option, int64_t value) { return curl.easy_setopt(handle, option, value); }
int portico_client_curl_setopt_pointer(void *handle, int option, const void *value) {
    return curl.easy_setopt(handle, option, value);
}
int portico_client_curl_setopt_blob(void *handle, int option, const void *data, size_t length) {
    struct portico_curl_blob blob = {(void *)data, length, 1 /* CURL_BLOB_COPY */};
    return curl.easy_setopt(handle, option, &blob);
}
int portico_client_curl_setopt_data_callback(void *handle, int option, portico_client_curl_data_callback callback) {
    return curl.easy_setopt(handle, option, callback);
}
int portico_client_curl_setopt_progress_callback(void *handle, int option, portico_client_curl_progress_callback callback) {
    return curl.easy_setopt(handle, option, callback);
}

int portico_client_curl_getinfo_long(void *handle, int info, long *value) { return curl.easy_getinfo(handle, info, value); }
int portico_client_curl_getinfo_string(void *handle, int info, const char **value) {
    return curl.easy_getinfo(handle, info, value);
}

void *portico_client_curl_slist_append(void *list, const char *string) { return curl.slist_append(list, string); }
void portico_client_curl_slist_free_all(void *list) { curl.slist_free_all(list); }

#endif  // Elsewhere PorticoClient does not depend on this target (Package.swift): the session delegate honours a trust.
