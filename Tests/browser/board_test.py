#!/usr/bin/env python3
"""Tandem in a real browser: people on one board, through scripts/run.

Starts scripts/run (a real mosquitto with the shipped users and ACL, a real coordinator,
tandem-web) on free loopback ports in a temporary data folder, then drives Debian's
chromium through Playwright with three browser contexts: alice, bob and carol. Every step
saves a screenshot under $TANDEM_SCREENSHOTS (default .build/browser-screenshots).

    python3 Tests/browser/board_test.py [--bin-dir .build/debug]

Exits 0 when every check passed; prints "N passed, N failed" last.
"""
import argparse
import base64
import json
import os
import random
import signal
import socket
import string
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
import zlib

from playwright.sync_api import sync_playwright, expect

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHROMIUM = os.environ.get("TANDEM_CHROMIUM", "/usr/bin/chromium")
SHOTS = os.environ.get("TANDEM_SCREENSHOTS", os.path.join(ROOT, ".build", "browser-screenshots"))

passed, failed = [], []


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check(name, body):
    """Runs one step; a failure is recorded with its message and the run goes on."""
    try:
        body()
        passed.append(name)
        print(f"ok   {name}", flush=True)
    except Exception as error:  # noqa: BLE001 - every failure is reported, none hidden
        failed.append(name)
        print(f"FAIL {name}: {error}", flush=True)


def shot(page, name):
    os.makedirs(SHOTS, exist_ok=True)
    page.screenshot(path=os.path.join(SHOTS, f"{name}.png"))


class System:
    """scripts/run on free ports: broker, coordinator and tandem-web."""

    def __init__(self, bin_dir):
        self.bin_dir = bin_dir
        self.data = tempfile.mkdtemp(prefix="tandem-browser-")
        self.mqtt_port, self.http_port = free_port(), free_port()
        env = dict(os.environ,
                   TANDEM_DATA_DIR=self.data, TANDEM_MQTT_PORT=str(self.mqtt_port), TANDEM_HTTP_PORT=str(self.http_port),
                   TANDEM_COORDINATOR_BIN=os.path.join(bin_dir, "tandem-coordinator"),
                   TANDEM_WEB_BIN=os.path.join(bin_dir, "tandem-web"))
        self.log = open(os.path.join(self.data, "run.out"), "w")
        self.process = subprocess.Popen(["bash", os.path.join(ROOT, "scripts", "run"), "--log-level", "info"], env=env,
                                        stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.url = f"http://127.0.0.1:{self.http_port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"scripts/run exited ({self.process.returncode}):\n{self.output()}")
            if "tandem-web is up" in self.output():
                return
            time.sleep(0.2)
        raise RuntimeError(f"tandem-web did not come up within 120 s:\n{self.output()}")

    def output(self):
        with open(os.path.join(self.data, "run.out")) as f:
            return f.read()

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        # The broker runs in a session of its own (scripts/run stops it last): if
        # scripts/run was killed before it could, nothing of this run is left behind.
        leftover = subprocess.run(["pgrep", "-f", "--", os.path.join(self.data, "mosquitto.conf")],
                                  capture_output=True, text=True).stdout.split()
        for pid in leftover:
            os.kill(int(pid), signal.SIGKILL)


class RawTab:
    """A tab that is not a browser: a WebSocket written by hand over a socket whose receive
    buffer can be made small (`rcvbuf`), so that a page that stops reading fills it, and
    tandem-web's socket behind it, within a few dozen frames."""

    def __init__(self, port, cookie, rcvbuf=None):
        self.sock = socket.socket()
        try:
            self._open(port, cookie, rcvbuf)
        except BaseException:
            self.sock.close()
            raise

    def _open(self, port, cookie, rcvbuf):
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(20)
        self.sock.connect(("127.0.0.1", port))
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                           f"Cookie: tandem_session={cookie}\r\n\r\n").encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self._read()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head.decode(errors="replace")
        self.bytes_read = 0

    def _read(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("tandem-web closed the socket")
        return chunk

    def send(self, frame):
        payload, mask = json.dumps(frame).encode(), os.urandom(4)
        head = bytes([0x81]) + (bytes([0x80 | len(payload)]) if len(payload) < 126
                                 else bytes([0x80 | 126]) + struct.pack(">H", len(payload)))
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def _take(self, count):
        while len(self.buffer) < count:
            self.buffer += self._read()
        taken, self.buffer = self.buffer[:count], self.buffer[count:]
        self.bytes_read += count
        return taken

    def frame(self):
        """The next text frame, parsed. tandem-web sends each message as one unmasked frame
        (no fragments, no compression); its pings (every 30 s) go unanswered, so a check
        using this finishes well within a minute."""
        while True:
            first, second = self._take(2)
            length = second & 0x7F
            if length == 126:
                length = struct.unpack(">H", self._take(2))[0]
            elif length == 127:
                length = struct.unpack(">Q", self._take(8))[0]
            payload = self._take(length)
            if first & 0x0F == 1:
                return json.loads(payload)

    def close(self):
        self.sock.close()


def side_by_side(browser, names, out):
    """Two screenshots of this run next to each other, captioned, as one PNG (the README's
    picture of two people on one board)."""
    import base64
    cells = ""
    for caption, name in names:
        with open(os.path.join(SHOTS, f"{name}.png"), "rb") as f:
            data = base64.b64encode(f.read()).decode()
        cells += (f'<figure><figcaption>{caption}</figcaption>'
                  f'<img src="data:image/png;base64,{data}"></figure>')
    page = browser.new_page(viewport={"width": 1640, "height": 620})
    page.set_content(
        "<style>body{margin:0;background:#e5e7eb;font:15px system-ui,sans-serif;display:flex;gap:16px;padding:16px}"
        "figure{margin:0;flex:1}figcaption{font-weight:600;margin-bottom:6px}"
        "img{width:100%;border-radius:8px;box-shadow:0 2px 8px #0003}</style>" + cells)
    page.screenshot(path=os.path.join(SHOTS, f"{out}.png"), full_page=True)
    page.close()


def sign_in(page, url, user, password):
    page.goto(url)
    page.fill("#sign-in-form input[name=username]", user)
    page.fill("#sign-in-form input[name=password]", password)
    page.click("#sign-in-form button[type=submit]")


def sticker_box(page, sticker_id):
    """The sticker's box, once it has one: the board may be drawing it anew (a frame just
    came), and an element replaced between finding it and measuring it has none."""
    for _ in range(50):
        box = page.locator(f'.sticker[data-id="{sticker_id}"]').bounding_box()
        if box is not None:
            return box
        time.sleep(0.1)
    return page.locator(f'.sticker[data-id="{sticker_id}"]').bounding_box()


def place_on_board(page, sticker_id):
    """Where a sticker is on its board (not in the viewport, which a drag near the page's
    edge may scroll)."""
    box, board = sticker_box(page, sticker_id), page.locator("#board").bounding_box()
    return {"x": box["x"] - board["x"], "y": box["y"] - board["y"]}


def centre(box):
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def board_point(page, x, y):
    """Where the board's point (x, y), in its units (1000 x 625), is on the page."""
    board = page.locator("#board").bounding_box()
    return board["x"] + x / 1000 * board["width"], board["y"] + y / 625 * board["height"]


def wait_sticker_at(page, sticker_id, box, tolerance=3):
    """Waits until the sticker's top left corner is where `box` says (page pixels)."""
    page.wait_for_function(
        f"""() => {{ const el = document.querySelector('.sticker[data-id="{sticker_id}"]');
            if (!el) return false; const r = el.getBoundingClientRect();
            return Math.abs(r.x - {box['x']}) <= {tolerance} && Math.abs(r.y - {box['y']}) <= {tolerance}; }}""")


def drag(page, sticker_id, dx, dy, steps=10):
    """Drags a sticker by (dx, dy) page pixels, as a person does: in small moves."""
    x, y = centre(sticker_box(page, sticker_id))
    page.mouse.move(x, y)
    page.mouse.down()
    for step in range(1, steps + 1):
        page.mouse.move(x + dx * step / steps, y + dy * step / steps)
        page.wait_for_timeout(30)
    page.mouse.up()


def png_pixels(path):
    """A PNG's width, height and a pixel reader (8-bit RGB or RGBA, not interlaced, as a
    canvas writes them): enough to check a download without an image library."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"not a PNG: {data[:8]!r}"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour_type, _, _, interlace = header
    assert depth == 8 and colour_type in (2, 6) and interlace == 0, header
    channels = 4 if colour_type == 6 else 3
    raw, stride = zlib.decompress(idat), width * channels
    rows, previous = [], bytearray(stride)
    for row in range(height):
        kind, line = raw[row * (stride + 1)], bytearray(raw[row * (stride + 1) + 1:(row + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append(line)
        previous = line
    return width, height, lambda x, y: tuple(rows[int(y)][int(x) * channels:int(x) * channels + 3])


def near_colour(actual, expected, tolerance=12):
    return all(abs(a - e) <= tolerance for a, e in zip(actual, expected))


def run(system):
    # Waited for, never timed: a busy machine only makes the run slower.
    expect.set_options(timeout=20_000)
    room = "board-" + "".join(random.choices(string.ascii_lowercase, k=6))
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        viewport = {"width": 1200, "height": 800}
        alice_context, bob_context = browser.new_context(viewport=viewport), browser.new_context(viewport=viewport)
        alice, bob = alice_context.new_page(), bob_context.new_page()
        carol = browser.new_context(viewport=viewport).new_page()

        def page_without_session():
            stranger = browser.new_context(viewport=viewport).new_page()
            stranger.goto(system.url)
            expect(stranger.locator("#sign-in")).to_be_visible()
            expect(stranger.locator("#app")).to_be_hidden()
            status = stranger.evaluate("fetch('/api/session').then(r => r.status)")
            assert status == 401, f"/api/session without a cookie: {status}"
            # A socket without a session is refused: it closes without a single frame.
            heard = stranger.evaluate("""() => new Promise((done) => {
                const frames = []; const ws = new WebSocket(`ws://${location.host}/ws`);
                ws.onmessage = (e) => frames.push(e.data); ws.onclose = () => done(frames); })""")
            assert heard == [], f"a socket without a session heard {heard}"
            shot(stranger, "01-sign-in")
        check("a page without a session gets nothing", page_without_session)

        def wrong_password():
            sign_in(alice, system.url, "alice", "not-her-password")
            expect(alice.locator("#sign-in-error")).to_contain_text("wrong username or password")
            expect(alice.locator("#app")).to_be_hidden()
            shot(alice, "02-wrong-password")
        check("sign-in with a wrong password is refused", wrong_password)

        def both_sign_in():
            sign_in(alice, system.url, "alice", "alice-demo")
            sign_in(bob, system.url, "bob", "bob-demo")
            expect(alice.locator("#whoami")).to_have_text("alice")
            expect(bob.locator("#whoami")).to_have_text("bob")
            cookie = [c for c in alice_context.cookies() if c["name"] == "tandem_session"][0]
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict", cookie
            assert alice.evaluate("document.cookie") == "", "the session cookie is readable from JavaScript"
            # Presence lists the people a session shows (its rooms' members, its chat
            # peers), not everyone signed in: bob is not alice's yet.
            expect(alice.locator("#presence")).to_contain_text("alice (you)")
            expect(alice.locator("#presence")).not_to_contain_text("bob")
        check("alice and bob sign in; each sees only themselves online", both_sign_in)

        def make_room_and_invite():
            alice.fill("#open-room input[name=room]", room)
            alice.select_option("#open-room select[name=photo]", "beach")
            alice.click("#open-room button[type=submit]")
            expect(alice.locator("#room-members")).to_contain_text("alice (owner)")
            board_top = alice.locator("#board").bounding_box()["y"]
            alice.fill("#invite input[name=member]", "bob")
            alice.click("#invite button[type=submit]")
            expect(alice.locator("#room-members")).to_contain_text("bob (editor)")
            # The board stays where it was as members come (the head is one line).
            moved = alice.locator("#board").bounding_box()["y"] - board_top
            assert abs(moved) < 1, f"alice's board moved {moved} px when bob joined"
            expect(bob.locator("#room-list")).to_contain_text(room)
            bob.click(f"#room-list li:has-text('{room}')")
            expect(bob.locator("#room-members")).to_contain_text("alice (owner)")
            style = bob.locator("#photo").get_attribute("style") or ""
            assert "beach" in style, f"bob's board has no beach photo: {style}"
            expect(alice.locator("#presence")).to_contain_text("bob")
            expect(bob.locator("#presence")).to_contain_text("alice")
        check("alice makes a room with a photo and invites bob; they see each other online", make_room_and_invite)

        state = {}

        def create_and_see():
            alice.click("#palette button[data-sticker=star]")
            sticker = alice.locator(".sticker").first
            expect(sticker).to_be_visible()
            state["id"] = sticker.get_attribute("data-id")
            started = time.monotonic()
            # Waited for, not timed (the machine may be busy): the time is printed.
            expect(bob.locator(f'.sticker[data-id="{state["id"]}"]')).to_be_visible()
            print(f"     bob saw it {time.monotonic() - started:.2f} s after alice's page showed it")
            shot(alice, "03-alice-created-a-sticker")
            shot(bob, "04-bob-sees-it")
        check("alice creates a sticker, bob sees it", create_and_see)

        def drag_shows_lock():
            sid = state["id"]
            before = sticker_box(bob, sid)
            box = sticker_box(alice, sid)
            x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
            alice.mouse.move(x, y)
            alice.mouse.down()
            for step in range(1, 11):
                alice.mouse.move(x + step * 15, y + step * 8)
                alice.wait_for_timeout(30)
            lock = bob.locator(f'.sticker[data-id="{sid}"] .lock')
            expect(lock).to_contain_text("alice")
            bob.wait_for_function(
                f"""() => {{ const el = document.querySelector('.sticker[data-id="{sid}"]');
                    return el && Math.abs(el.getBoundingClientRect().x - {before['x']}) > 50; }}""")
            shot(bob, "05-bob-sees-alice-holding-it")
            shot(alice, "06-alice-dragging")
            side_by_side(browser, [("alice drags the star", "06-alice-dragging"),
                                   ("bob sees it move, held by alice", "05-bob-sees-alice-holding-it")],
                         "two-users-on-one-board")
            state["held"] = (x, y)
        check("alice drags: bob sees the lock badge and the sticker moving", drag_shows_lock)

        def bob_cannot_drag():
            sid = state["id"]
            box = sticker_box(bob, sid)
            placed = place_on_board(bob, sid)
            bob.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            bob.mouse.down()
            bob.mouse.move(box["x"] + 200, box["y"] + 150, steps=5)
            bob.mouse.up()
            expect(bob.locator("#toast")).to_contain_text("alice is holding this sticker")
            after = place_on_board(bob, sid)
            assert abs(after["x"] - placed["x"]) < 2 and abs(after["y"] - placed["y"]) < 2, f"bob moved it: {placed} -> {after}"
            shot(bob, "07-bob-cannot-drag")
        check("bob cannot drag a sticker alice holds", bob_cannot_drag)

        def rejected_edit_snaps_back():
            sid = state["id"]
            box = sticker_box(bob, sid)
            # Bob's page sends a move anyway (as a page that raced alice would): the
            # coordinator refuses it and bob's board snaps back, with a message.
            bob.evaluate(f"""sendWithRef({{ type: "edit", room: state.room, op: "update", sticker: "{sid}",
                frame: {{ x: 10, y: 10, width: 120, height: 120 }} }}, {{ label: "move", sticker: "{sid}" }})""")
            expect(bob.locator("#toast")).to_contain_text("someone else holds it")
            after = sticker_box(bob, sid)
            assert abs(after["x"] - box["x"]) < 2 and abs(after["y"] - box["y"]) < 2, f"not snapped back: {box} -> {after}"
            shot(bob, "08-bob-rejected-edit-snapped-back")
        check("a rejected edit snaps back on the sender's page", rejected_edit_snaps_back)

        def release():
            expect(bob.locator("#toast")).to_be_visible()
            alice.mouse.up()
            sid = state["id"]
            expect(bob.locator(f'.sticker[data-id="{sid}"] .lock')).to_have_count(0)
            # "someone else holds it" goes with its cause, not seconds later.
            expect(bob.locator("#toast")).to_be_hidden(timeout=1_500)
            shot(alice, "09-alice-let-go")
            shot(bob, "09b-bob-no-stale-notice")
        check("alice lets go: the lock goes on bob's page, and so does the notice about it", release)


        def resize_with_the_handle():
            sid = state["id"]
            before = sticker_box(bob, sid)
            handle = alice.locator(f'.sticker[data-id="{sid}"] .handle').bounding_box()
            hx, hy = handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2
            alice.mouse.move(hx, hy)
            alice.mouse.down()
            alice.mouse.move(hx + 60, hy + 40, steps=6)
            alice.mouse.up()
            bob.wait_for_function(
                f"""() => {{ const el = document.querySelector('.sticker[data-id="{sid}"]');
                    return el && el.getBoundingClientRect().width > {before['width']} + 30; }}""")
            expect(bob.locator(f'.sticker[data-id="{sid}"] .lock')).to_have_count(0)
            shot(bob, "10-bob-sees-it-resized")
        check("alice resizes with the handle: bob sees it bigger", resize_with_the_handle)

        def arrow_keys_move():
            sid = state["id"]
            before = sticker_box(bob, sid)
            box = sticker_box(alice, sid)
            alice.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            expect(alice.locator(f'.sticker[data-id="{sid}"].selected')).to_have_count(1)
            expect(bob.locator(f'.sticker[data-id="{sid}"] .lock')).to_have_count(0)
            for _ in range(4):
                alice.keyboard.press("ArrowRight")
            alice.keyboard.press("ArrowDown")
            bob.wait_for_function(
                f"""() => {{ const el = document.querySelector('.sticker[data-id="{sid}"]');
                    return el && el.getBoundingClientRect().x > {before['x']} + 20; }}""")
            expect(bob.locator(f'.sticker[data-id="{sid}"] .lock')).to_have_count(0)
            shot(alice, "11-alice-moved-it-with-the-arrow-keys")
        check("the arrow keys move the selected sticker", arrow_keys_move)

        def stays_on_the_photo():
            sid = state["id"]
            board = alice.locator("#board").bounding_box()
            box = sticker_box(alice, sid)
            x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
            alice.mouse.move(x, y)
            alice.mouse.down()
            alice.mouse.move(board["x"] + board["width"] + 400, board["y"] - 300, steps=8)
            alice.mouse.up()
            expect(bob.locator(f'.sticker[data-id="{sid}"] .lock')).to_have_count(0)
            bob_board = bob.locator("#board").bounding_box()
            bob.wait_for_function(
                f"""() => {{ const el = document.querySelector('.sticker[data-id="{sid}"]');
                    const b = document.getElementById('board').getBoundingClientRect();
                    if (!el) return false; const r = el.getBoundingClientRect();
                    return Math.abs(r.right - b.right) < 2 && Math.abs(r.top - b.top) < 2; }}""")
            after = sticker_box(bob, sid)
            assert after["x"] + after["width"] <= bob_board["x"] + bob_board["width"] + 1, (after, bob_board)
            assert after["y"] >= bob_board["y"] - 1, (after, bob_board)
            shot(bob, "09c-dragged-against-the-corner-stays-on-the-photo")
        check("a sticker dragged past the photo's edge stops at it", stays_on_the_photo)

        def badge_at_the_top_stays_visible():
            sid = state["id"]   # in the top right corner now
            box = sticker_box(alice, sid)
            alice.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            alice.mouse.down()
            lock = bob.locator(f'.sticker[data-id="{sid}"] .lock')
            expect(lock).to_contain_text("held by alice")
            board = bob.locator("#board").bounding_box()
            badge = lock.bounding_box()
            assert badge["y"] >= board["y"], f"the badge is cut off at the top: {badge} vs board {board}"
            shot(bob, "09d-held-by-badge-below-a-sticker-at-the-top")
            alice.mouse.up()
            expect(lock).to_have_count(0)
        check("the held-by badge of a sticker at the top shows below it", badge_at_the_top_stays_visible)

        def delete_key_removes():
            alice.click("#palette button[data-sticker=heart]")
            heart = alice.locator('.sticker:has(img[alt=heart])')
            expect(heart).to_have_count(1)
            hid = heart.get_attribute("data-id")
            expect(bob.locator(f'.sticker[data-id="{hid}"]')).to_be_visible()
            expect(bob.locator(f'.sticker[data-id="{hid}"] .lock')).to_have_count(0)
            box = sticker_box(alice, hid)
            alice.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            expect(bob.locator(f'.sticker[data-id="{hid}"] .lock')).to_have_count(0)
            alice.keyboard.press("Delete")
            expect(bob.locator(f'.sticker[data-id="{hid}"]')).to_have_count(0)
            expect(alice.locator(f'.sticker[data-id="{hid}"]')).to_have_count(0)
        check("Delete removes the selected sticker, on both pages", delete_key_removes)

        def owner_changes_a_role():
            alice.select_option('#room-members select[data-member=bob]', "viewer")
            expect(bob.locator("#room-members")).to_contain_text("bob (viewer)")
            bob.click("#palette button[data-sticker=sun]")
            expect(bob.locator("#toast")).to_contain_text("add sun")
            expect(bob.locator(".sticker:has(img[alt=sun])")).to_have_count(0)
            shot(bob, "12-bob-a-viewer-cannot-add")
            alice.select_option('#room-members select[data-member=bob]', "editor")
            expect(bob.locator("#room-members")).to_contain_text("bob (editor)")
            expect(bob.locator("#toast")).to_be_hidden()
        check("the owner makes bob a viewer (his edit is refused), then an editor again", owner_changes_a_role)

        def undo_and_redo():
            # bob has changed nothing yet that he could undo.
            expect(bob.locator("#undo")).to_be_disabled()
            expect(bob.locator("#redo")).to_be_disabled()
            alice.click("#palette button[data-sticker=sun]")
            sun = alice.locator(".sticker:has(img[alt=sun])")
            expect(sun).to_have_count(1)
            sid = sun.get_attribute("data-id")
            state["sun"] = sid
            expect(bob.locator(f'.sticker[data-id="{sid}"]')).to_be_visible()
            expect(bob.locator(f'.sticker[data-id="{sid}"] .lock')).to_have_count(0)
            expect(alice.locator("#undo")).to_be_enabled()
            expect(alice.locator("#redo")).to_be_disabled()
            start = sticker_box(bob, sid)
            state["sun-start"] = start
            drag(alice, sid, 200, 60)
            bob.wait_for_function(
                f"""() => {{ const el = document.querySelector('.sticker[data-id="{sid}"]');
                    return el && el.getBoundingClientRect().x > {start['x']} + 150 && !el.querySelector('.lock'); }}""")
            dragged = sticker_box(bob, sid)
            shot(alice, "21-alice-dragged-the-sun")
            # One Ctrl+Z takes back the whole drag, on bob's page too.
            alice.keyboard.press("Control+z")
            wait_sticker_at(bob, sid, start)
            wait_sticker_at(alice, sid, sticker_box(bob, sid))
            expect(alice.locator("#redo")).to_be_enabled()
            shot(bob, "22-bob-sees-alices-undo")
            shot(alice, "22b-alice-undid-her-drag")
            # A person presses a key when the page offers the step: pressed before alice's
            # page has heard that her last step can be redone (or undone), it says "nothing
            # to redo" and sends nothing, and bob's page may show the step before hers hears.
            alice.click("#redo")
            wait_sticker_at(bob, sid, dragged)
            alice.click("#undo")
            wait_sticker_at(bob, sid, start)
            expect(alice.locator("#redo")).to_be_enabled()
            alice.keyboard.press("Control+Shift+z")
            wait_sticker_at(bob, sid, dragged)
            expect(alice.locator("#undo")).to_be_enabled()
            alice.keyboard.press("Meta+z")          # Cmd+Z, as on a Mac
            wait_sticker_at(bob, sid, start)
            expect(alice.locator("#redo")).to_be_enabled()
            alice.keyboard.press("Control+y")
            wait_sticker_at(bob, sid, dragged)
            expect(alice.locator("#redo")).to_be_disabled()
            expect(bob.locator(f'.sticker[data-id="{sid}"] .lock')).to_have_count(0)
            shot(alice, "23-alice-redid-it")
        check("undo and redo, with the keys and the buttons: the whole drag, on both pages", undo_and_redo)

        def refused_undo_says_why():
            sid = state["sun"]
            before = sticker_box(alice, sid)
            drag(bob, sid, -80, 90)
            alice.wait_for_function(
                f"""() => {{ const el = document.querySelector('.sticker[data-id="{sid}"]');
                    return el && el.getBoundingClientRect().y > {before['y']} + 60 && !el.querySelector('.lock'); }}""")
            moved = sticker_box(alice, sid)
            expect(bob.locator("#undo")).to_be_enabled()
            # alice takes the sun and holds it; bob undoes his move: refused, and told why.
            alice.mouse.move(*centre(moved))
            alice.mouse.down()
            expect(bob.locator(f'.sticker[data-id="{sid}"] .lock')).to_contain_text("held by alice")
            bob.keyboard.press("Control+z")
            expect(bob.locator("#toast")).to_have_text("can't undo: alice is holding that sticker")
            shot(bob, "24-bob-cannot-undo-while-alice-holds-it")
            after = sticker_box(alice, sid)
            assert abs(after["x"] - moved["x"]) < 2 and abs(after["y"] - moved["y"]) < 2, f"the refused undo moved it: {moved} -> {after}"
            alice.mouse.up()
            # The note goes with its cause; the undo stayed, and now it goes through.
            expect(bob.locator("#toast")).to_be_hidden(timeout=1_500)
            expect(bob.locator("#undo")).to_be_enabled()
            bob.keyboard.press("Control+z")
            wait_sticker_at(alice, sid, before)
            shot(alice, "24b-bobs-undo-went-through-once-alice-let-go")
        check("a refused undo says who holds the sticker; once let go it goes through", refused_undo_says_why)

        def history_and_restore():
            alice.click("#history-toggle")
            expect(alice.locator("#history-panel")).to_be_visible()
            rows = alice.locator("#history-list li")
            expect(rows.first).to_contain_text("bob moved the sun")
            expect(rows.first).to_contain_text("now")
            expect(rows.nth(1)).to_contain_text("bob moved the sun")
            expect(alice.locator("#history-list")).to_contain_text("alice moved the sun")
            expect(alice.locator("#history-list")).to_contain_text("alice added a sun")
            versions = [int(v) for v in rows.evaluate_all("(items) => items.map((li) => li.dataset.version)")]
            assert versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions), versions
            # The panel is over the board's right side, inside it, and its rows are whole.
            panel, board = alice.locator("#history-panel").bounding_box(), alice.locator("#board").bounding_box()
            assert panel["y"] >= board["y"] - 1 and panel["y"] + panel["height"] <= board["y"] + board["height"] + 1, (panel, board)
            shot(alice, "25-alice-history-newest-first")
            # Restore right after the sun was added: it is back where it was made, for bob too.
            added = alice.locator("#history-list li", has_text="alice added a sun")
            added.locator("button.restore").click()
            wait_sticker_at(bob, state["sun"], state["sun-start"])
            expect(alice.locator("#toast")).to_contain_text("restored the room to how it was at")
            # The open history follows the room: the restore is on top now.
            expect(rows.first).to_contain_text("alice restored an earlier version")
            expect(rows.first).to_contain_text("now")
            shot(bob, "26-bob-sees-the-restore")
            shot(alice, "26b-alice-history-after-the-restore")
            # Older pages: "More" until the start of the room.
            more = alice.locator("#history-more")
            expect(more).to_be_visible()
            for _ in range(20):
                if not more.is_visible():
                    break
                count = rows.count()
                more.click()
                alice.wait_for_function(f"document.querySelectorAll('#history-list li').length > {count} || "
                                        "document.getElementById('history-more').hidden")
            expect(more).to_be_hidden()
            expect(rows.last).to_contain_text("alice set the photo")
            rows.last.scroll_into_view_if_needed()
            shot(alice, "26c-alice-history-paged-to-the-start")
            versions = [int(v) for v in rows.evaluate_all("(items) => items.map((li) => li.dataset.version)")]
            assert versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions), versions
        check("the history lists changes newest first with names; a restore shows on the other page; More pages back", history_and_restore)

        def a_viewer_cannot_restore_or_undo():
            bob.click("#history-toggle")
            expect(bob.locator("#history-list li").first).to_contain_text("alice restored an earlier version")
            expect(bob.locator("#history-list button.restore").first).to_be_visible()
            alice.select_option('#room-members select[data-member=bob]', "viewer")
            expect(bob.locator("#room-members")).to_contain_text("bob (viewer)")
            expect(bob.locator("#history-list button.restore")).to_have_count(0)
            expect(bob.locator("#undo")).to_be_disabled()
            expect(bob.locator("#redo")).to_be_disabled()
            shot(bob, "27-bob-a-viewer-sees-no-restore")
            alice.select_option('#room-members select[data-member=bob]', "editor")
            expect(bob.locator("#room-members")).to_contain_text("bob (editor)")
            expect(bob.locator("#history-list button.restore").first).to_be_visible()
            bob.click("#history-close")
            alice.click("#history-close")
            expect(alice.locator("#history-panel")).to_be_hidden()
        check("a viewer is offered no restore and no undo; an editor again, they come back", a_viewer_cannot_restore_or_undo)

        def pointers():
            mine = bob.locator('.cursor[data-user="alice"]')
            alice.mouse.move(*board_point(alice, 300, 200), steps=4)
            expect(mine.locator(".name")).to_be_visible()
            expect(mine.locator(".name")).to_have_text("alice")
            colour = alice.evaluate("colour('alice')")
            assert mine.locator("path").get_attribute("fill") == colour, "alice's pointer is not in her colour"

            def at(page, user, x, y):
                page.wait_for_function(
                    f"""() => {{ const el = document.querySelector('.cursor[data-user="{user}"]');
                        const b = document.getElementById('board').getBoundingClientRect();
                        if (!el) return false; const r = el.getBoundingClientRect();
                        return Math.abs(r.left - (b.left + {x} / 1000 * b.width)) < 2
                            && Math.abs(r.top - (b.top + {y} / 625 * b.height)) < 2; }}""")
            at(bob, "alice", 300, 200)
            bob.mouse.move(*board_point(bob, 640, 380), steps=4)
            theirs = alice.locator('.cursor[data-user="bob"]')
            expect(theirs.locator(".name")).to_be_visible()
            expect(theirs.locator(".name")).to_have_text("bob")
            at(alice, "bob", 640, 380)
            alice.mouse.move(*board_point(alice, 520, 330), steps=6)
            at(bob, "alice", 520, 330)
            shot(alice, "28-alice-sees-bobs-pointer")
            shot(bob, "29-bob-sees-alices-pointer")
            side_by_side(browser, [("alice sees bob's pointer", "28-alice-sees-bobs-pointer"),
                                   ("bob sees alice's pointer", "29-bob-sees-alices-pointer")], "two-pointers")
            # Near the corner the name turns inwards: it stays on the photo.
            alice.mouse.move(*board_point(alice, 985, 615), steps=4)
            at(bob, "alice", 985, 615)
            name, board = mine.locator(".name").bounding_box(), bob.locator("#board").bounding_box()
            assert name["x"] >= board["x"] and name["x"] + name["width"] <= board["x"] + board["width"], (name, board)
            assert name["y"] >= board["y"] and name["y"] + name["height"] <= board["y"] + board["height"], (name, board)
            shot(bob, "29b-alices-pointer-in-the-corner")
            # alice's pointer leaves the photo: bob's page drops it at once (not after fading).
            alice.mouse.move(60, 500, steps=3)
            expect(mine).to_have_count(0, timeout=2_000)
            # bob's pointer stops over the photo: it fades on alice's page after a few seconds.
            bob.mouse.move(*board_point(bob, 600, 360), steps=3)
            at(alice, "bob", 600, 360)
            still = time.monotonic()
            expect(theirs).to_have_count(0, timeout=10_000)
            idle = time.monotonic() - still
            assert idle > 2.5, f"bob's still pointer went after {idle:.1f} s, not after a few idle seconds"
            print(f"     bob's still pointer faded after {idle:.1f} s")
            bob.mouse.move(60, 500)
        check("each sees the other's named pointer move; it goes when it leaves the photo or stays still", pointers)

        def download_the_photo():
            with alice.expect_download() as info:
                alice.click("#download")
            download = info.value
            assert download.suggested_filename == f"{room}.png", download.suggested_filename
            path = os.path.join(SHOTS, "30-downloaded-photo.png")
            download.save_as(path)
            width, height, pixel = png_pixels(path)
            assert (width, height) == (1000, 625), (width, height)
            # Drawn as the board shows it: the beach's sky, and each sticker where its frame is.
            assert near_colour(pixel(500, 4), (0x7d, 0xd3, 0xfc), 20), f"no sky at the top: {pixel(500, 4)}"
            stickers = alice.evaluate("state.roomFrame.stickers.filter((s) => !s.image.startsWith('photo:'))")
            fills = {"sun": (0xfb, 0xbf, 0x24), "star": (0xff, 0xcc, 0x33)}
            for sticker in stickers:
                f = sticker["frame"]
                x, y = f["x"] + f["width"] / 2, f["y"] + f["height"] / 2
                if sticker["image"] == "star":
                    y = f["y"] + f["height"] * 0.55      # the star's body, below its centre line
                colour = pixel(x, y)
                assert near_colour(colour, fills[sticker["image"]]), f"{sticker['image']} at ({x:.0f}, {y:.0f}): {colour}"
            shot(alice, "30b-alice-after-the-download")
        check("Download saves the photo with its stickers as a PNG of the board's size", download_the_photo)

        def chat_request_accept_messages_read_marks():
            alice.click(".tabs button[data-view=chats]")
            alice.fill("#new-chat input[name=peer]", "bob")
            alice.click("#new-chat button[type=submit]")
            expect(alice.locator("#chat-list")).to_contain_text("bob · pending")
            bob.click(".tabs button[data-view=chats]")
            expect(bob.locator("#chat-list")).to_contain_text("alice · received")
            bob.click("#chat-list li:has-text('alice')")
            shot(bob, "13-bob-has-a-chat-request")
            bob.click("#chat-actions button:has-text('Accept')")
            expect(bob.locator("#chat-title")).to_contain_text("alice (active)")
            expect(alice.locator("#chat-title")).to_contain_text("bob (active)")
            # bob looks at the board: alice's message is unread there.
            bob.click(".tabs button[data-view=rooms]")
            alice.fill("#send-message input[name=text]", "hello bob, nice beach")
            alice.click("#send-message button[type=submit]")
            expect(bob.locator("#unread-total")).to_have_text("1")
            shot(bob, "14-bob-has-one-unread")
            expect(alice.locator("#messages li.mine").last).to_contain_text("✓ sent")
            bob.click(".tabs button[data-view=chats]")
            expect(bob.locator("#messages")).to_contain_text("hello bob, nice beach")
            expect(bob.locator("#unread-total")).to_be_hidden()
            expect(alice.locator("#messages li.mine").last).to_contain_text("✓✓ read")
            bob.fill("#send-message input[name=text]", "hi alice! on my way")
            bob.click("#send-message button[type=submit]")
            expect(alice.locator("#messages")).to_contain_text("hi alice! on my way")
            expect(bob.locator("#messages li.mine").last).to_contain_text("✓✓ read")
            shot(alice, "15-alice-chat-read-marks")
            shot(bob, "16-bob-chat-read-marks")
            side_by_side(browser, [("alice", "15-alice-chat-read-marks"), ("bob", "16-bob-chat-read-marks")],
                         "two-users-chatting")
        check("a chat: request, accept, messages both ways, unread count, read marks", chat_request_accept_messages_read_marks)

        def older_history_on_scroll():
            # 60 more messages from alice: bob's page shows the latest 50, the first ones
            # come from the coordinator's history when he scrolls up.
            alice.evaluate("""() => { for (let i = 1; i <= 60; i++)
                sendWithRef({ type: "dm", op: "message", peer: "bob", text: `message ${i} of 60` }, { label: "message" }); }""")
            expect(bob.locator("#messages")).to_contain_text("message 60 of 60")
            expect(bob.locator("#messages")).not_to_contain_text("hello bob, nice beach")
            # As a person would: up to the top, and again while the list says there is
            # more. The 60 were sent in one go, many in the same millisecond, and a page
            # asked by time may be filled by those (seen once in CI-like runs: one page
            # brought "hi alice" but not "hello bob").
            marker = bob.locator("#messages .older-marker")
            for _ in range(5):
                bob.locator("#messages").evaluate("(list) => { list.scrollTop = 0; list.dispatchEvent(new Event('scroll')); }")
                try:
                    expect(marker).to_contain_text("the start of the conversation", timeout=3_000)
                    break
                except AssertionError:
                    continue
            expect(bob.locator("#messages")).to_contain_text("hello bob, nice beach")
            expect(bob.locator("#messages")).to_contain_text("message 1 of 60")
            bob.locator("#messages").evaluate("(list) => { list.scrollTop = 0; list.dispatchEvent(new Event('scroll')); }")
            expect(bob.locator("#messages .older-marker")).to_contain_text("the start of the conversation")
            shot(bob, "17-bob-scrolled-to-older-history")
        check("older history loads on scroll", older_history_on_scroll)

        def a_page_that_stops_reading_holds_nobody_up():
            # A room of alice's with 20 stickers (room frames of some 3 KB), shown on two
            # more tabs of bob's: one reads, one stops reading with a receive buffer of
            # 4 KB. Alice moves a sticker 300 times (at her session's pace, 50 frames a
            # second). tandem-web's socket to the stuck tab fills (its send buffer is
            # bounded: WebServer.pageSendBufferBytes) and its writer waits. Bob's other tab
            # (same session, same client) keeps up; the stuck one, once it reads, gets the
            # latest room without every version in between, and still answers.
            def cookie(context):
                return [c for c in context.cookies() if c["name"] == "tandem_session"][0]["value"]

            def answered(tab, ref):
                while not (lambda f: f.get("type") == "receipt" and f.get("ref") == ref)(tab.frame()):
                    pass
            tabs = []
            try:
                sender = RawTab(system.http_port, cookie(alice_context))
                tabs.append(sender)
                stuck = RawTab(system.http_port, cookie(bob_context), rcvbuf=4096)
                tabs.append(stuck)
                follower = RawTab(system.http_port, cookie(bob_context))
                tabs.append(follower)
                suffix = "".join(random.choices(string.ascii_lowercase, k=5))
                busy, sticker, moves = f"stuck-{suffix}", "moved", 300

                def at(x):
                    return {"x": x, "y": 40, "width": 80, "height": 80}
                sender.send({"type": "watch", "room": busy})
                for index in range(20):
                    sender.send({"type": "edit", "ref": f"c{index}", "room": busy, "op": "create", "sticker": f"still-{index}",
                                 "image": "heart", "frame": at(10 * index)})
                sender.send({"type": "edit", "ref": "make", "room": busy, "op": "create", "sticker": sticker,
                             "image": "star", "frame": at(0)})
                sender.send({"type": "member", "ref": "invite", "room": busy, "op": "invite", "member": "bob"})
                answered(sender, "invite")
                stuck.send({"type": "watch", "room": busy})
                follower.send({"type": "watch", "room": busy})

                def shows(frame, x):
                    return frame.get("type") == "room" and any(
                        s["id"] == sticker and s["frame"]["x"] == x for s in frame.get("stickers", []))
                while not shows(follower.frame(), 0):
                    pass
                started = time.monotonic()
                for move in range(1, moves + 1):
                    sender.send({"type": "edit", "ref": f"m{move}", "room": busy, "op": "update", "sticker": sticker,
                                 "frame": at(move)})
                while not shows(follower.frame(), moves):
                    pass
                print(f"     bob's reading tab had the last of {moves} moves {time.monotonic() - started:.1f} s after the first was sent")
                versions, rooms = [], 0
                while True:
                    frame = stuck.frame()
                    if frame.get("type") != "room" or frame.get("room") != busy:
                        continue
                    rooms += 1
                    versions.append(frame["version"])
                    if shows(frame, moves):
                        break
                assert versions == sorted(versions), f"the stuck tab's versions went back: {versions}"
                assert rooms < moves / 2, f"the stuck tab was sent {rooms} room frames ({stuck.bytes_read} bytes) for {moves} moves"
                print(f"     the stuck tab then read {rooms} room frames ({stuck.bytes_read} bytes) for {moves} moves")
                stuck.send({"type": "edit", "ref": "after", "room": busy, "op": "update", "sticker": sticker, "frame": at(5)})
                answered(stuck, "after")
            finally:
                for tab in tabs:
                    tab.close()
        check("a tab that stops reading holds up neither the room nor its own session's other tab", a_page_that_stops_reading_holds_nobody_up)

        def workout_card():
            workout = "run-" + "".join(random.choices(string.ascii_lowercase, k=5))
            password = os.path.join(system.data, "alice.password")
            with open(password, "w") as f:
                f.write("alice-demo\n")
            agent = subprocess.Popen(
                [os.path.join(system.bin_dir, "tandem-agent"), "workout", "--host", "127.0.0.1", "--port", str(system.mqtt_port),
                 "--username", "alice", "--password-file", password, "--device", "watch", "--start-origin", "local",
                 "--workout", workout, "--duration", "12", "--flight-interval", "1"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                alice.click(".tabs button[data-view=workouts]")
                card = alice.locator(f'.workout[data-id="{workout}"]')
                expect(card.locator(".status")).to_have_text("running")
                expect(card.locator("dd[data-field=origin]")).to_contain_text("watch")
                expect(card.locator("dd[data-field=heart-rate]")).to_contain_text("bpm")
                expect(card.locator("dd[data-field=distance]")).to_contain_text("km")
                expect(card.locator("dd[data-field=pace]")).to_contain_text("/km")
                alice.wait_for_function(
                    f"""() => {{ const line = document.querySelector('.workout[data-id="{workout}"] polyline');
                        return line && line.getAttribute('points').split(' ').length >= 3; }}""")
                shot(alice, "18-alice-workout-live")
                expect(card.locator(".status")).to_have_text("finished", timeout=60_000)
                shot(alice, "19-alice-workout-finished")
                assert agent.wait(timeout=60) == 0, f"tandem-agent workout exited {agent.returncode}"
            finally:
                if agent.poll() is None:
                    agent.kill()
                    agent.wait()
        check("a workout driven by tandem-agent shows live on the page", workout_card)

        def a_stranger_is_told_plainly():
            sign_in(carol, system.url, "carol", "carol-demo")
            expect(carol.locator("#whoami")).to_have_text("carol")
            carol.fill("#open-room input[name=room]", room)
            carol.click("#open-room button[type=submit]")
            notice = carol.locator("#room-notice")
            expect(notice).to_contain_text(f"You are not a member of room {room}")
            expect(carol.locator("#palette")).to_be_hidden()
            expect(carol.locator(".sticker")).to_have_count(0)
            carol.wait_for_timeout(4_000)   # past any message's fading
            expect(notice).to_be_visible()
            expect(carol.locator("#palette")).to_be_hidden()
            shot(carol, "19b-carol-not-a-member")
            # Invited, she gets the board and its people.
            alice.click(".tabs button[data-view=rooms]")
            alice.fill("#invite input[name=member]", "carol")
            alice.click("#invite button[type=submit]")
            expect(carol.locator("#palette")).to_be_visible()
            expect(notice).to_be_hidden()
            carol.click(f"#room-list li:has-text('{room}')")
            expect(carol.locator(".sticker")).not_to_have_count(0)
            expect(carol.locator("#presence")).to_contain_text("alice")
        check("someone who is not a member is told so and offered nothing to edit, until invited", a_stranger_is_told_plainly)

        def removing_asks_first_and_the_removed_stop_seeing_the_owner():
            board_top = alice.locator("#board").bounding_box()["y"]
            alice.click("#room-members button[title='remove carol']")
            expect(alice.locator("#room-confirm")).to_contain_text("Remove carol from this room?")
            shot(alice, "19c-remove-asks-first")
            alice.click("#room-confirm button.no")
            expect(alice.locator("#room-confirm")).to_be_hidden()
            expect(alice.locator("#room-members")).to_contain_text("carol (editor)")
            # carol's pointer keeps moving over her photo while she is removed: it leaves
            # alice's page with her, not seconds later.
            carol.evaluate("""() => { const board = document.getElementById('board'); let i = 0;
                window.wiggle = setInterval(() => { const r = board.getBoundingClientRect(); i += 1;
                    board.dispatchEvent(new PointerEvent('pointermove', { bubbles: true,
                        clientX: r.left + 200 + (i % 10) * 8, clientY: r.top + 150 })); }, 100); }""")
            carols = alice.locator('.cursor[data-user="carol"]')
            expect(carols.locator(".name")).to_be_visible()
            alice.click("#room-members button[title='remove carol']")
            alice.click("#room-confirm button.yes")
            expect(alice.locator("#room-members")).not_to_contain_text("carol")
            expect(carols).to_have_count(0, timeout=2_000)
            alice.wait_for_timeout(1_000)
            expect(carols).to_have_count(0)
            carol.evaluate("clearInterval(window.wiggle)")
            expect(carol.locator("#room-notice")).to_contain_text("no longer a member")
            # carol shares nothing else with alice: alice leaves her Online list.
            expect(carol.locator("#presence")).not_to_contain_text("alice")
            moved = alice.locator("#board").bounding_box()["y"] - board_top
            assert abs(moved) < 1, f"alice's board moved {moved} px when carol left"
            shot(carol, "19d-carol-removed-sees-only-herself-online")
        check("removing a member asks first; the removed one's pointer and presence go", removing_asks_first_and_the_removed_stop_seeing_the_owner)

        def removed_member_loses_the_board():
            alice.click(".tabs button[data-view=rooms]")
            bob.click(".tabs button[data-view=rooms]")
            expect(bob.locator(".sticker")).not_to_have_count(0)
            alice.click("#room-members button[title='remove bob']")
            alice.click("#room-confirm button.yes")
            expect(bob.locator("#room-notice")).to_contain_text("no longer a member")
            expect(bob.locator(".sticker")).to_have_count(0)
            expect(bob.locator("#room-list")).not_to_contain_text(room)
            expect(alice.locator("#room-members")).not_to_contain_text("bob")
            shot(bob, "20-bob-removed-from-the-room")
        check("the owner removes bob: his board goes away, with a notice", removed_member_loses_the_board)

        def sign_out_ends_session():
            bob.click("#sign-out")
            expect(bob.locator("#sign-in")).to_be_visible()
            expect(alice.locator("#presence")).not_to_contain_text("bob")
        check("bob signs out: alice sees him go offline", sign_out_ends_session)

        browser.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", default=os.path.join(ROOT, ".build", "debug"))
    args = parser.parse_args()
    if not os.path.exists(CHROMIUM):
        print(f"notice: skipping the browser tests: {CHROMIUM} is not installed (apt-get install --no-install-recommends chromium)")
        return 0
    system = System(os.path.abspath(args.bin_dir))
    try:
        run(system)
    finally:
        system.stop()
    if failed:
        print(f"--- scripts/run's output ({system.data}/run.out):\n{system.output()[-4000:]}")
    print(f"screenshots in {SHOTS}")
    print(f"{len(passed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
