#!/usr/bin/env python3
"""Pages behind a cut link recover (issue 34), in a real browser.

Two hosts of the test's own (network namespaces behind a bridge in a namespace of its
own, as Tests/TestSupport/NetLab.swift makes them): "broker" runs mosquitto (the shipped
configuration), the coordinator (SQLite) and bob's tandem-web; "web" runs alice's
tandem-web, which reaches the broker over the lab's link. Chromium, on this machine,
opens each page through a portal (Tests/netlab/portal.py) into its host.

alice and bob share a room, each with a sticker. Then the web host's link is cut for
10 s while both drag their stickers, and healed: both pages must end up showing both
moves (alice's, made while her tandem-web could not reach the broker, once the link is
back). Screenshots under $TANDEM_SCREENSHOTS (default .build/browser-screenshots).

    python3 Tests/browser/netfault_page_test.py [--bin-dir .build/debug]

Needs root, ip (iproute2) and iptables; elsewhere it says so and exits 0. Every
namespace is deleted at the end, also after a failure.
"""
import argparse
import os
import random
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from board_test import (CHROMIUM, ROOT, check, failed, passed, place_on_board, shot,  # noqa: E402
                        sign_in)
from board_test import drag as drag_once  # noqa: E402
from playwright.sync_api import expect, sync_playwright  # noqa: E402

BROKER, WEB = "10.77.0.2", "10.77.0.3"


def sh(*args):
    result = subprocess.run(list(args), capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {result.stderr.strip()}")
    return result.stdout


class Lab:
    """Two hosts, `broker` and `web`, and the switch between them."""

    def __init__(self):
        self.prefix = f"tandemlab-{os.getpid()}-{random.randrange(65536)}"
        self.switch, self.hosts = f"{self.prefix}-switch", {}
        self.processes, self.portals = [], []
        sh("ip", "netns", "add", self.switch)
        sh("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.switch, "link", "set", "br0", "up")
        for name, address in (("broker", BROKER), ("web", WEB)):
            ns = f"{self.prefix}-{name}"
            self.hosts[name] = ns
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", self.switch, "link", "add", f"v-{name}", "type", "veth", "peer", "name", "eth0", "netns", ns)
            sh("ip", "-n", self.switch, "link", "set", f"v-{name}", "master", "br0")
            sh("ip", "-n", self.switch, "link", "set", f"v-{name}", "up")
            sh("ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")

    def start(self, host, argv, log):
        process = subprocess.Popen(["ip", "netns", "exec", self.hosts[host]] + argv,
                                   stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.processes.append(process)
        return process

    def portal(self, host, port):
        """A loopback port here whose connections are made inside `host` to its 127.0.0.1:port."""
        process = subprocess.Popen([sys.executable, "-u", os.path.join(ROOT, "Tests", "netlab", "portal.py"),
                                    "--netns", self.hosts[host], "--to", f"127.0.0.1:{port}"],
                                   stdout=subprocess.PIPE, text=True)
        self.portals.append(process)
        return int(process.stdout.readline())

    def cut(self, host):
        sh("ip", "-n", self.switch, "link", "set", f"v-{host}", "down")

    def heal(self, host):
        sh("ip", "-n", self.switch, "link", "set", f"v-{host}", "up")

    def tear_down(self):
        for process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        for process in self.portals:
            process.kill()
            process.wait()
        for ns in [self.switch] + list(self.hosts.values()):
            for pid in subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split():
                os.kill(int(pid), signal.SIGKILL)
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)


def wait_until(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise RuntimeError(f"not within {timeout} s: {what}")


def wait_listening(process, port, timeout=30):
    """Until a socket of `process`'s namespace listens on `port` (its /proc/PID/net/tcp)."""
    needle = f":{port:04X} 00000000:0000 0A"

    def listening():
        if process.poll() is not None:
            raise RuntimeError(f"exited with {process.returncode}")
        try:
            with open(f"/proc/{process.pid}/net/tcp") as f:
                return needle in f.read()
        except FileNotFoundError:
            return False
    wait_until(listening, timeout, f"something listening on port {port}")


def place(page, sticker_id):
    """place_on_board, waiting out a moment when the sticker is being drawn anew."""
    for _ in range(50):
        try:
            return place_on_board(page, sticker_id)
        except TypeError:  # no box yet
            time.sleep(0.1)
    return place_on_board(page, sticker_id)


def drag(page, sticker_id, dx, dy):
    """board_test's drag, once the sticker has a box: the board may be drawing it anew
    (a frame just came) when the drag starts, and the drag reads its box before it moves
    the mouse, so trying again is safe."""
    for _ in range(50):
        try:
            return drag_once(page, sticker_id, dx, dy)
        except TypeError:  # no box yet
            time.sleep(0.1)
    return drag_once(page, sticker_id, dx, dy)


def near(a, b, tolerance=3):
    return abs(a["x"] - b["x"]) <= tolerance and abs(a["y"] - b["y"]) <= tolerance


def run(lab, bin_dir, data):
    os.makedirs(os.path.join(data, "mosquitto"))
    shutil.copy(os.path.join(ROOT, "broker-config", "dynamic-security.json"), os.path.join(data, "mosquitto"))
    with open(os.path.join(data, "mosquitto.conf"), "w") as f:
        f.write(sh("bash", os.path.join(ROOT, "scripts", "broker-conf"), "1883", os.path.join(data, "mosquitto"), BROKER))
    for name, secret in (("coordinator.password", "coordinator-demo"), ("coordinator-admin.password", "coordinator-admin-demo")):
        with open(os.path.join(data, name), "w") as f:
            f.write(secret + "\n")
    log = open(os.path.join(data, "lab.log"), "w")
    broker = lab.start("broker", [shutil.which("mosquitto") or "/usr/sbin/mosquitto", "-c", os.path.join(data, "mosquitto.conf")], log)
    wait_listening(broker, 1883)
    coordinator = lab.start("broker", [
        os.path.join(bin_dir, "tandem-coordinator"), "--host", BROKER, "--port", "1883",
        "--username", "coordinator", "--password-file", os.path.join(data, "coordinator.password"),
        "--broker-admin-username", "coordinator-admin", "--broker-admin-password-file", os.path.join(data, "coordinator-admin.password"),
        "--database", os.path.join(data, "tandem.sqlite")], log)
    webs = {}
    for host in ("broker", "web"):
        web = lab.start(host, [os.path.join(bin_dir, "tandem-web"), "--host", BROKER, "--port", "1883",
                               "--http-host", "127.0.0.1", "--http-port", "8080"], log)
        wait_listening(web, 8080)
        webs[host] = f"http://127.0.0.1:{lab.portal(host, 8080)}"
    assert coordinator.poll() is None, "the coordinator exited"

    expect.set_options(timeout=30_000)
    room = "netcut-" + "".join(random.choices(string.ascii_lowercase, k=6))
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        viewport = {"width": 1200, "height": 800}
        alice = browser.new_context(viewport=viewport).new_page()
        bob = browser.new_context(viewport=viewport).new_page()
        state = {}

        def share_a_room():
            sign_in(alice, webs["web"], "alice", "alice-demo")
            sign_in(bob, webs["broker"], "bob", "bob-demo")
            expect(alice.locator("#whoami")).to_have_text("alice")
            expect(bob.locator("#whoami")).to_have_text("bob")
            alice.fill("#open-room input[name=room]", room)
            alice.click("#open-room button[type=submit]")
            expect(alice.locator("#room-members")).to_contain_text("alice (owner)")
            alice.fill("#invite input[name=member]", "bob")
            alice.click("#invite button[type=submit]")
            expect(bob.locator("#room-list")).to_contain_text(room)
            bob.click(f"#room-list li:has-text('{room}')")
            expect(bob.locator("#room-members")).to_contain_text("alice (owner)")
            # One at a time, each moved aside before the next is made (the palette puts a
            # new sticker near the middle, at random): no drag below can land on the
            # other's sticker.
            alice.click("#palette button[data-sticker=star]")
            expect(alice.locator(".sticker")).to_have_count(1)
            state["a"] = alice.locator(".sticker").first.get_attribute("data-id")
            expect(bob.locator(f'.sticker[data-id="{state["a"]}"]')).to_be_visible()
            drag(alice, state["a"], -250, 0)
            wait_until(lambda: near(place(bob, state["a"]), place(alice, state["a"])), 30, "bob seeing the star moved")
            bob.click("#palette button[data-sticker=heart]")
            expect(bob.locator(".sticker")).to_have_count(2)
            state["b"] = [s for s in bob.locator(".sticker").evaluate_all("els => els.map(e => e.dataset.id)") if s != state["a"]][0]
            expect(alice.locator(f'.sticker[data-id="{state["b"]}"]')).to_be_visible()
            drag(bob, state["b"], 200, 0)
            wait_until(lambda: near(place(alice, state["b"]), place(bob, state["b"])), 30, "alice seeing the heart moved")
            shot(alice, "net-01-alice-before-the-cut")
        check("alice (behind the link to be cut) and bob share a room with a sticker each", share_a_room)

        def drag_through_a_cut():
            lab.cut("web")
            cut_at = time.monotonic()
            drag(alice, state["a"], -60, 90)
            drag(bob, state["b"], 60, -90)
            state["alice_dragged_to"] = place(alice, state["a"])
            state["bob_dragged_to"] = place(bob, state["b"])
            alice.wait_for_timeout(max(0, 10_000 - int((time.monotonic() - cut_at) * 1000)))
            shot(alice, "net-02-alice-during-the-cut")
            shot(bob, "net-03-bob-during-the-cut")
            lab.heal("web")
            healed_at = time.monotonic()

            # Both moves on both pages: bob's went through at once; alice's, made while her
            # tandem-web could not reach the broker, when the link is back (her session's
            # QoS 1 messages are resent; the coordinator applies late events when they
            # arrive, CONTRACT "Ordering").
            def both_moves_everywhere():
                return all(near(place(page, sid), state[dragged])
                           for page in (alice, bob) for sid, dragged in ((state["a"], "alice_dragged_to"), (state["b"], "bob_dragged_to")))
            try:
                wait_until(both_moves_everywhere, 60, "both moves on both pages")
            finally:
                shot(alice, "net-04-alice-after-the-heal")
                shot(bob, "net-05-bob-after-the-heal")
                print(f"     alice's page: {[place(alice, sid) for sid in (state['a'], state['b'])]}, "
                      f"bob's: {[place(bob, sid) for sid in (state['a'], state['b'])]}, "
                      f"dragged to {state['alice_dragged_to']} and {state['bob_dragged_to']}")
            print(f"     both pages showed both moves {time.monotonic() - healed_at:.1f} s after the heal")
            expect(alice.locator("#connection")).to_have_text("live")
        check("a 10 s cut between alice's tandem-web and the broker while both drag: both moves on both pages afterwards", drag_through_a_cut)

        browser.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin-dir", default=os.path.join(ROOT, ".build", "debug"))
    args = parser.parse_args()
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("iptables"):
        print("skipped: network namespaces need root, ip (iproute2) and iptables")
        return 0
    data = tempfile.mkdtemp(prefix="tandem-netfault-page-")
    lab = Lab()
    try:
        run(lab, os.path.abspath(args.bin_dir), data)
    except Exception as error:  # noqa: BLE001 - reported, then the lab is removed
        failed.append(f"setup: {error}")
        print(f"FAIL setup: {error}")
    finally:
        lab.tear_down()
    if failed:
        with open(os.path.join(data, "lab.log")) as f:
            print(f"--- the lab's log:\n{f.read()[-4000:]}")
    else:
        shutil.rmtree(data, ignore_errors=True)
    print(f"{len(passed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
