#!/usr/bin/env python3
"""A door from the test process into a network namespace of NetLab's (Tests/TestSupport/NetLab.swift).

    portal.py --netns NAME --to ADDRESS:PORT [--delay-ms N]

Listens on a free port of 127.0.0.1 in the namespace it was started in (the test
process's own) and prints it on the first line of standard output. Every connection it
accepts is carried to ADDRESS:PORT over a socket made inside namespace NAME, so that
socket meets whatever the lab does to NAME's link: a cut, a one-way drop, loss. With
--delay-ms, each chunk is held that long in each direction before it is passed on (the
kernel here has no netem: this is the tests' own delayer).

setns(2) changes the namespace of the calling thread only: one thread enters NAME and
makes every outbound socket; a socket stays in the namespace it was made in.
"""
import argparse
import ctypes
import heapq
import os
import queue
import socket
import sys
import threading
import time

CLONE_NEWNET = 0x40000000


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--netns", required=True)
    parser.add_argument("--to", required=True)
    parser.add_argument("--delay-ms", type=int, default=0)
    args = parser.parse_args()
    host, port = args.to.rsplit(":", 1)
    target = (host, int(port))
    delay = args.delay_ms / 1000.0

    requests = queue.Queue()

    def connector():
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/var/run/netns/{args.netns}", os.O_RDONLY)
        if libc.setns(fd, CLONE_NEWNET) != 0:
            print(f"portal: setns {args.netns}: {os.strerror(ctypes.get_errno())}", file=sys.stderr, flush=True)
            os._exit(1)
        os.close(fd)
        while True:
            reply = requests.get()
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.settimeout(5)
            try:
                s.connect(target)
                s.settimeout(None)
                reply.put(s)
            except OSError as error:
                s.close()
                reply.put(error)

    threading.Thread(target=connector, daemon=True).start()

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    print(listener.getsockname()[1], flush=True)

    def pump(source, sink, done):
        """Copies source to sink, each chunk `delay` late, in order."""
        held = queue.Queue()

        def writer():
            while True:
                due, chunk = held.get()
                if chunk is None:
                    break
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                try:
                    sink.sendall(chunk)
                except OSError:
                    break
            done()

        if delay > 0:
            threading.Thread(target=writer, daemon=True).start()
        while True:
            try:
                chunk = source.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            if delay > 0:
                held.put((time.monotonic() + delay, chunk))
            else:
                try:
                    sink.sendall(chunk)
                except OSError:
                    break
        if delay > 0:
            held.put((0, None))
        else:
            done()

    while True:
        inside, _ = listener.accept()
        inside.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reply = queue.Queue()
        requests.put(reply)
        outside = reply.get()
        if isinstance(outside, OSError):
            inside.close()
            continue
        closed = threading.Lock()
        state = {"open": 2}

        def done(inside=inside, outside=outside, state=state, closed=closed):
            # Either direction ending ends both: a peer sees its connection drop when
            # the lab's side of it drops.
            with closed:
                for s in (inside, outside):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                state["open"] -= 1
                if state["open"] == 0:
                    inside.close()
                    outside.close()

        threading.Thread(target=pump, args=(inside, outside, done), daemon=True).start()
        threading.Thread(target=pump, args=(outside, inside, done), daemon=True).start()


if __name__ == "__main__":
    main()
