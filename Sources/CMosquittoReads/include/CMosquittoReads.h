#ifndef TANDEM_CMOSQUITTOREADS_H
#define TANDEM_CMOSQUITTOREADS_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * libmosquitto's socket reads through a buffer.
 *
 * libmosquitto 2.0 reads each packet in three or more read(2) calls: the command byte,
 * then the remaining length a byte at a time, then the rest. A client that takes a
 * dozen packets in one wake makes three or four dozen system calls for them. This
 * points libmosquitto's own calls to read(2) and close(2) (its entries in the global
 * offset table, nothing else in the process) at the two functions below: a read takes
 * what the socket holds (up to 16 KiB) in one call and serves libmosquitto's small
 * reads from it (a read of 16 KiB or more, a large payload's rest, goes straight to the
 * socket); a close drops what is left of its descriptor's buffer.
 *
 * What a caller must do once it is installed: a socket may be drained into the buffer
 * while libmosquitto has not yet taken its packets, so "is there more to read" is
 * tandem_mosquitto_reads_buffered(fd) > 0 (poll(2) and FIONREAD see only the kernel's
 * side), and a reader that stops must not leave bytes there: nothing would wake it for
 * them. TLS clients read through OpenSSL, which this leaves alone.
 *
 * One thread at a time reads a given descriptor (the one driving its client), as
 * libmosquitto already requires.
 */

/* Installs the two functions into the loaded libmosquitto; 1 when done (or done
 * before), 0 when it could not (no libmosquitto loaded, another architecture, or its
 * tables not as expected): then libmosquitto reads as it always did. Call before any
 * client exists. */
int tandem_mosquitto_reads_install(void);

/* Whether `fd` has a buffer (descriptors past the process's hard limit on open files at
 * the install, or past 2^20, do not: their reads are libmosquitto's own). */
int tandem_mosquitto_reads_cover(int fd);

/* While on, reads of `fd` serve only what is held and then answer EAGAIN without
 * reading the socket: a reader that has read enough for one turn takes what is held
 * (16 KiB at most) and leaves the rest in the kernel, where poll and epoll see it. */
void tandem_mosquitto_reads_held_only(int fd, int on);

/* Bytes read from the socket and not yet taken by libmosquitto. */
size_t tandem_mosquitto_reads_buffered(int fd);

/* Calls served and system calls made, since the process started (for tests and
 * benchmarks). */
void tandem_mosquitto_reads_counts(uint64_t *calls, uint64_t *syscalls);

/* What libmosquitto calls instead of read(2) and close(2); public for tests. */
ssize_t tandem_mosquitto_read(int fd, void *buffer, size_t count);
int tandem_mosquitto_close(int fd);
#endif
