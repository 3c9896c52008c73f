#ifndef TRACER_CCURL_H
#define TRACER_CCURL_H
// Typed wrappers around libcurl for Swift: curl_easy_setopt and curl_easy_getinfo are variadic,
// which Swift cannot call, so each argument type gets its own non-variadic function here.
#include <curl/curl.h>
#endif
