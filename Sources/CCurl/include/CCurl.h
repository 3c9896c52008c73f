#ifndef TRACER_CCURL_H
#define TRACER_CCURL_H
// Typed wrappers around libcurl for Swift: curl_easy_setopt and curl_easy_getinfo are variadic,
// which Swift cannot call, so each argument type gets its own non-variadic function here.
#include <curl/curl.h>

/// curl_global_init(CURL_GLOBAL_DEFAULT); the flag is a macro expression Swift does not import.
CURLcode tracer_curl_global_init(void);

CURLcode tracer_curl_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode tracer_curl_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value);
CURLcode tracer_curl_setopt_string(CURL *handle, CURLoption option, const char *value);
CURLcode tracer_curl_setopt_pointer(CURL *handle, CURLoption option, void *value);
CURLcode tracer_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value);

/// Sets a POST body that libcurl copies (CURLOPT_POSTFIELDSIZE_LARGE, then CURLOPT_COPYPOSTFIELDS),
/// so the caller's buffer need not outlive the call; `bytes` may be NULL when `count` is 0.
CURLcode tracer_curl_setopt_post_body(CURL *handle, const void *bytes, curl_off_t count);

typedef size_t (*tracer_curl_data_callback)(char *buffer, size_t size, size_t count, void *userdata);
typedef int (*tracer_curl_xferinfo_callback)(void *userdata, curl_off_t download_total, curl_off_t download_now,
                                             curl_off_t upload_total, curl_off_t upload_now);

CURLcode tracer_curl_setopt_write_function(CURL *handle, tracer_curl_data_callback callback);
CURLcode tracer_curl_setopt_header_function(CURL *handle, tracer_curl_data_callback callback);
CURLcode tracer_curl_setopt_xferinfo_function(CURL *handle, tracer_curl_xferinfo_callback callback);

CURLcode tracer_curl_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLcode tracer_curl_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value);

#endif
