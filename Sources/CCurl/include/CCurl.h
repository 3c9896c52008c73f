#ifndef TRACER_CCURL_H
#define TRACER_CCURL_H
// libcurl for Swift, loaded on first use. Two reasons for this shim:
// - curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call, so each
//   argument type gets its own non-variadic function here;
// - libcurl is opened with dlopen when the first transfer starts, not linked: loading it and the
//   libraries behind it (GnuTLS, Kerberos, LDAP, p11-kit ...) costs a process about 6 MB of
//   resident memory, which `tracer run` never needs; only `tracer check`, `tracer report` and
//   the server's object-store sync make requests.
// Only the types and constants come from <curl/curl.h> (Debian: libcurl4-openssl-dev at build
// time, libcurl4 at run time).
#include <curl/curl.h>

/// Opens libcurl (the file named by the TRACER_LIBCURL environment variable, or libcurl.so.4) and
/// runs curl_global_init(CURL_GLOBAL_DEFAULT), once per process, whichever thread calls first.
/// Returns CURLE_OK, or CURLE_FAILED_INIT with the reason in tracer_curl_load_error(). No other
/// function here may be called unless this returned CURLE_OK.
CURLcode tracer_curl_global_init(void);
/// Why tracer_curl_global_init failed, or "" when it did not.
const char *tracer_curl_load_error(void);

CURL *tracer_curl_easy_init(void);
void tracer_curl_easy_cleanup(CURL *handle);
CURLcode tracer_curl_easy_perform(CURL *handle);
const char *tracer_curl_easy_strerror(CURLcode code);
struct curl_slist *tracer_curl_slist_append(struct curl_slist *list, const char *string);
void tracer_curl_slist_free_all(struct curl_slist *list);

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
