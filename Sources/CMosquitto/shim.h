#ifndef TANDEM_CMOSQUITTO_SHIM_H
#define TANDEM_CMOSQUITTO_SHIM_H
#include <mosquitto.h>
#include <mqtt_protocol.h>
/* TandemMQTT wakes its poll(2) loop with an eventfd (MQTTClient.swift, kick()). */
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

/*
 * libmosquitto 2.0's mosquitto_new() opens a socket pair that only mosquitto_loop()
 * reads (to wake its select()); every packet queued writes a byte into it, which fails
 * with EAGAIN once the pair is full. A client driven by mosquitto_loop_read/_write
 * (TandemMQTT's) never reads it: two descriptors and a system call a packet for
 * nothing. 2.0 has no option to go without it (later versions do), so this closes it
 * and marks it absent, which every use in 2.0 checks for (INVALID_SOCKET, -1).
 *
 * struct mosquitto is opaque; in the client library of 2.0 it begins with
 * `int sock, sockpairR, sockpairW`. This acts only when everything says that is what
 * it looks at: libmosquitto 2.0.x, a client not yet connected (sock is -1), and two
 * distinct descriptors that are Unix stream sockets, a byte sent on the second read
 * back on the first. Otherwise it leaves the client as it was. Call it right after
 * mosquitto_new(), before any other thread knows the client.
 * Returns 1 when the pair was closed, 0 when it was left.
 */
static inline int tandem_mosquitto_close_wake_pair(struct mosquitto *mosq) {
    int major = 0, minor = 0, revision = 0;
    mosquitto_lib_version(&major, &minor, &revision);
    if (major != 2 || minor != 0 || mosq == NULL) return 0;
    int *fields = (int *)mosq;
    int sock = fields[0], r = fields[1], w = fields[2];
    if (sock != -1 || r < 0 || w < 0 || r == w) return 0;
    for (int i = 0; i < 2; i++) {
        int fd = i == 0 ? r : w, type = 0;
        socklen_t length = sizeof(type);
        struct sockaddr address;
        socklen_t addressLength = sizeof(address);
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) != 0 || type != SOCK_STREAM) return 0;
        if (getsockname(fd, &address, &addressLength) != 0 || address.sa_family != AF_UNIX) return 0;
    }
    char probe = 't', echo = 0;
    if (send(w, &probe, 1, MSG_DONTWAIT | MSG_NOSIGNAL) != 1) return 0;
    if (recv(r, &echo, 1, MSG_DONTWAIT) != 1 || echo != probe) return 0;
    close(r);
    close(w);
    fields[1] = -1;
    fields[2] = -1;
    return 1;
}
#endif
