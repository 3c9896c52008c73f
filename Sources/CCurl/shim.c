#include "CCurl.h"

CURLcode tracer_curl_global_init(void) { return curl_global_init(CURL_GLOBAL_DEFAULT); }

CURLcode tracer_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode tracer_curl_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode tracer_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode tracer_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode tracer_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode tracer_curl_setopt_post_body(CURL *handle, const void *bytes, curl_off_t count) {
    CURLcode result = curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, count);
    if (result != CURLE_OK) return result;
    // COPYPOSTFIELDS with a size of 0 still needs a valid pointer.
    return curl_easy_setopt(handle, CURLOPT_COPYPOSTFIELDS, count > 0 ? bytes : "");
}

CURLcode tracer_curl_setopt_write_function(CURL *handle, tracer_curl_data_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, callback);
}

CURLcode tracer_curl_setopt_header_function(CURL *handle, tracer_curl_data_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, callback);
}

CURLcode tracer_curl_setopt_xferinfo_function(CURL *handle, tracer_curl_xferinfo_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, callback);
}

CURLcode tracer_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

CURLcode tracer_curl_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}
