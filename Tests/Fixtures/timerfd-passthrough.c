/*
 * Preloaded ahead of libfaketime by WallClockStepTests: timerfd_settime straight to the
 * kernel.
 *
 * libfaketime 0.9.10 (Debian's) wraps timerfd_settime and moves every absolute deadline
 * by the fake offset, whatever the timer's clock, FAKETIME_DONT_FAKE_MONOTONIC or not.
 * libdispatch (under Swift's Task.sleep) and SwiftNIO arm CLOCK_MONOTONIC and
 * CLOCK_BOOTTIME timerfds with absolute deadlines, so under an offset of +1 h every
 * timed wake-up in the process is moved an hour back: on a machine up for less than an
 * hour that is a negative time, the kernel says EINVAL and the timer never fires; on
 * one up for longer it fires at once. A real clock step (NTP, an operator) moves
 * CLOCK_REALTIME only and never these timers, so the test takes libfaketime's clock
 * reads and leaves the timers to the kernel. (No Tandem code arms a CLOCK_REALTIME
 * timerfd; one would now be off by the offset.)
 */
#define _GNU_SOURCE
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

int timerfd_settime(int fd, int flags, const struct itimerspec *new_value, struct itimerspec *old_value) {
    return (int)syscall(SYS_timerfd_settime, fd, flags, new_value, old_value);
}
