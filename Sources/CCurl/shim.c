#include "CCurl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

// The libcurl functions the shim calls, resolved once by load_libcurl.
static struct {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *handle);
    CURLcode (*easy_perform)(CURL *handle);
    const char *(*easy_strerror)(CURLcode code);
    CURLcode (*easy_setopt)(CURL *handle, CURLoption option, ...);
    CURLcode (*easy_getinfo)(CURL *handle, CURLINFO info, ...);
    struct curl_slist *(*slist_append)(struct curl_slist *list, const char *string);
    void (*slist_free_all)(struct curl_slist *list);
} curl;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static CURLcode load_result = CURLE_FAILED_INIT;
static char load_error[512] = "";

static int resolve(void *library, const char *name, const char *path, void **slot) {
    *slot = dlsym(library, name);
    if (*slot == NULL) {
        snprintf(load_error, sizeof load_error, "%s has no function %s; it is not libcurl 7.x or 8.x", path, name);
        return 0;
    }
    return 1;
}

static void load_libcurl(void) {
    const char *path = getenv("TRACER_LIBCURL");
    if (path == NULL || path[0] == '\0') path = "libcurl.so.4";
    // RTLD_LOCAL: libcurl's symbols stay out of the process's global namespace.
    void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        const char *reason = dlerror();
        snprintf(load_error, sizeof load_error, "%s", reason != NULL ? reason : path);
        return;
    }
    if (!resolve(library, "curl_global_init", path, (void **)&curl.global_init)
        || !resolve(library, "curl_easy_init", path, (void **)&curl.easy_init)
        || !resolve(library, "curl_easy_cleanup", path, (void **)&curl.easy_cleanup)
        || !resolve(library, "curl_easy_perform", path, (void **)&curl.easy_perform)
        || !resolve(library, "curl_easy_strerror", path, (void **)&curl.easy_strerror)
        || !resolve(library, "curl_easy_setopt", path, (void **)&curl.easy_setopt)
        || !resolve(library, "curl_easy_getinfo", path, (void **)&curl.easy_getinfo)
        || !resolve(library, "curl_slist_append", path, (void **)&curl.slist_append)
        || !resolve(library, "curl_slist_free_all", path, (void **)&curl.slist_free_all)) {
        dlclose(library);
        return;
    }
    CURLcode result = curl.global_init(CURL_GLOBAL_DEFAULT);
    if (result != CURLE_OK) {
        snprintf(load_error, sizeof load_error, "curl_global_init failed: %s", curl.easy_strerror(result));
        return;
    }
    // Never closed: libcurl stays loaded, and initialized, for the rest of the process.
    load_result = CURLE_OK;
}

CURLcode tracer_curl_global_init(void) {
    pthread_once(&load_once, load_libcurl);
    return load_result;
}

const char *tracer_curl_load_error(void) { return load_error; }

CURL *tracer_curl_easy_init(void) { return curl.easy_init(); }

void tracer_curl_easy_cleanup(CURL *handle) { curl.easy_cleanup(handle); }

CURLcode tracer_curl_easy_perform(CURL *handle) { return curl.easy_perform(handle); }

const char *tracer_curl_easy_strerror(CURLcode code) { return curl.easy_strerror(code); }

struct curl_slist *tracer_curl_slist_append(struct curl_slist *list, const char *string) {
    return curl.slist_append(list, string);
}

void tracer_curl_slist_free_all(struct curl_slist *list) {
    // curl_slist_free_all(NULL) is a no-op, and callers free a list they may never have built.
    if (list != NULL) curl.slist_free_all(list);
}

CURLcode tracer_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl.easy_setopt(handle, option, value);
}

CURLcode tracer_curl_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl.easy_setopt(handle, option, value);
}

CURLcode tracer_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl.easy_setopt(handle, option, value);
}

CURLcode tracer_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl.easy_setopt(handle, option, value);
}

CURLcode tracer_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl.easy_setopt(handle, option, value);
}

CURLcode tracer_curl_setopt_post_body(CURL *handle, const void *bytes, curl_off_t count) {
    CURLcode result = curl.easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, count);
    if (result != CURLE_OK) return result;
    // COPYPOSTFIELDS with a size of 0 still needs a valid pointer.
    return curl.easy_setopt(handle, CURLOPT_COPYPOSTFIELDS, count > 0 ? bytes : "");
}

CURLcode tracer_curl_setopt_write_function(CURL *handle, tracer_curl_data_callback callback) {
    return curl.easy_setopt(handle, CURLOPT_WRITEFUNCTION, callback);
}

CURLcode tracer_curl_setopt_header_function(CURL *handle, tracer_curl_data_callback callback) {
    return curl.easy_setopt(handle, CURLOPT_HEADERFUNCTION, callback);
}

CURLcode tracer_curl_setopt_xferinfo_function(CURL *handle, tracer_curl_xferinfo_callback callback) {
    return curl.easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, callback);
}

CURLcode tracer_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl.easy_getinfo(handle, info, value);
}

CURLcode tracer_curl_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl.easy_getinfo(handle, info, value);
}
