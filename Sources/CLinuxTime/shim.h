#ifndef TRACER_CLINUXTIME_SHIM_H
#define TRACER_CLINUXTIME_SHIM_H

// Glibc's Swift module map leaves out <sys/timerfd.h>: the one way to wait for a wall-clock time
// that also wakes when the clock is set (NTP steps, `date -s`) rather than sleeping on through it.
#include <sys/timerfd.h>
#include <time.h>

// Macros that Swift cannot import as constants are re-exposed as typed values.
static const int tracer_tfd_cloexec = TFD_CLOEXEC;
static const int tracer_tfd_nonblock = TFD_NONBLOCK;
static const int tracer_tfd_timer_abstime = TFD_TIMER_ABSTIME;
static const int tracer_tfd_timer_cancel_on_set = TFD_TIMER_CANCEL_ON_SET;

#endif
