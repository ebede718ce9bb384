// ppoll(2), which Swift's Glibc module leaves out (glibc declares it only under
// _GNU_SOURCE): poll with a timeout in nanoseconds, for PollLoop's timers.
#include <poll.h>
#include <signal.h>
#include <time.h>

extern int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout, const sigset_t *sigmask);
