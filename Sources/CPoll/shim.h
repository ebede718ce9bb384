// ppoll(2), which Swift's Glibc module leaves out (glibc declares it only under
// _GNU_SOURCE): poll with a timeout in nanoseconds, for PollLoop's timers. And epoll(7)
// through helpers that take plain values: `struct epoll_event` is packed on x86_64,
// which Swift does not import field by field.
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <time.h>

extern int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout, const sigset_t *sigmask);

/// epoll_ctl with `events` and `data` as the event's u64; returns epoll_ctl's result.
static inline int cpoll_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data) {
    struct epoll_event event;
    event.events = events;
    event.data.u64 = data;
    return epoll_ctl(epfd, op, fd, &event);
}

/// epoll_wait without waiting, the ready events copied out into two plain arrays of
/// `max` each; returns how many (or -1).
static inline int cpoll_epoll_ready(int epfd, uint64_t *datas, uint32_t *events, int max) {
    struct epoll_event ready[256];
    if (max > 256) max = 256;
    int n = epoll_wait(epfd, ready, max, 0);
    for (int i = 0; i < n; i++) {
        datas[i] = ready[i].data.u64;
        events[i] = ready[i].events;
    }
    return n;
}
