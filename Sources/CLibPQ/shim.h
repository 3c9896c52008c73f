#ifndef TRACER_CLIBPQ_SHIM_H
#define TRACER_CLIBPQ_SHIM_H

// PostgreSQL's C client (Debian: libpq-dev), for the server's optional PostgreSQL store.
#include <libpq-fe.h>

#endif
