// Tandem in a browser. One WebSocket per tab; the frames are small JSON objects
// (docs/PROTOCOL.md, "The browser front end"). The server holds the credentials and the
// MQTT session: this page only ever sees the session cookie's effects, never the cookie.
"use strict";

const BOARD_W = 1000, BOARD_H = 625;          // the board's own units (sticker frames)
const UPDATE_INTERVAL_MS = 50;                 // drag updates: at most 20 a second
const STICKERS = ["star", "heart", "sun", "flower", "cat", "rocket"];
const PHOTO_PREFIX = "photo:";                 // a sticker whose image names a photo is the room's photo
const PHOTO_STICKER = "photo";
const LOCK_ROOM = 45;                          // board units above a sticker its "held by" badge needs

const $ = (id) => document.getElementById(id);
const state = {
  user: null, socket: null, nextRef: 1, refs: new Map(),
  rooms: [], online: [], room: null, roomFrame: null, selected: null,
  drag: null,                                  // {sticker, mode, start, frame, sent, timer}
  conversations: [], chat: null,
  older: new Map(),                            // peer -> older messages from history frames (oldest first)
  noOlder: new Set(),                          // peers whose history has nothing older
  askedOlder: new Set(),                       // peers with a history frame on its way
  readAsked: new Map(),                        // peer -> unread count a read was sent for
  workouts: new Map(),                         // workoutId -> {workout, heartRates}
};

// ---- Colours: one per user, the same on every page -------------------------------
function colour(user) {
  let h = 0;
  for (const c of user) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return `hsl(${h % 360} 70% 42%)`;
}

/// A message that fades after a few seconds. `stillTrue`, when given, says whether its
/// cause still holds: it goes as soon as the room shows otherwise (a sticker let go).
function toast(text, stillTrue) {
  const t = $("toast");
  t.textContent = text;
  t.hidden = false;
  toast.stillTrue = stillTrue || null;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; toast.stillTrue = null; }, 3500);
}

function recheckToast() {
  if (toast.stillTrue && !toast.stillTrue()) {
    $("toast").hidden = true;
    toast.stillTrue = null;
  }
}

/// Someone else holds sticker `id` (as the room last said).
function heldByOther(id) {
  const sticker = stickerById(id);
  return !!(sticker && sticker.owner && sticker.owner !== state.user);
}

// ---- Sign-in ---------------------------------------------------------------------
async function boot() {
  const answer = await fetch("/api/session");
  if (answer.ok) {
    start((await answer.json()).user);
  } else {
    showSignIn();
  }
}

function showSignIn() {
  $("sign-in").hidden = false;
  $("app").hidden = true;
  $("sign-out").hidden = true;
  $("whoami").textContent = "";
}

$("sign-in-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  $("sign-in-error").textContent = "";
  const answer = await fetch("/api/sign-in", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ username: form.get("username"), password: form.get("password") }),
  });
  const body = await answer.json().catch(() => ({}));
  event.target.password.value = "";
  if (!answer.ok) {
    $("sign-in-error").textContent = body.error || `sign-in failed (${answer.status})`;
    return;
  }
  start(body.user);
});

$("sign-out").addEventListener("click", async () => {
  await fetch("/api/sign-out", { method: "POST" });
  if (state.socket) state.socket.close();
  showSignIn();
});

function start(user) {
  state.user = user;
  $("sign-in").hidden = true;
  $("app").hidden = false;
  $("sign-out").hidden = false;
  $("whoami").textContent = user;
  $("whoami").style.color = colour(user);
  connect();
}

// ---- The socket ------------------------------------------------------------------
function connect() {
  const socket = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws`);
  state.socket = socket;
  $("connection").textContent = "connecting…";
  socket.addEventListener("open", () => {
    $("connection").textContent = "live";
    if (state.room) send({ type: "watch", room: state.room });
  });
  socket.addEventListener("message", (event) => receive(JSON.parse(event.data)));
  socket.addEventListener("close", async () => {
    if (state.socket !== socket) return;
    $("connection").textContent = "offline";
    const answer = await fetch("/api/session").catch(() => null);
    if (answer && answer.ok) setTimeout(connect, 1000); else showSignIn();
  });
}

function send(frame) {
  if (state.socket && state.socket.readyState === WebSocket.OPEN) state.socket.send(JSON.stringify(frame));
}

/// Sends a frame that gets a receipt; `what` says what to tell the person if it is refused.
function sendWithRef(frame, what) {
  const ref = `r${state.nextRef++}`;
  state.refs.set(ref, what);
  send({ ...frame, ref });
}

function receive(frame) {
  switch (frame.type) {
    case "hello": break;
    case "rooms":
      state.rooms = frame.rooms;
      // Invited meanwhile: the room is theirs to edit now.
      if (state.notMember && state.rooms.some((r) => r.roomId === state.notMember)) { state.notMember = null; drawBoard(); }
      drawRoomList();
      break;
    case "presence": state.online = frame.online; drawPresence(); if (state.roomFrame) drawBoard(); break;
    case "room": if (frame.room === state.room) { state.roomFrame = frame; drawBoard(); } break;
    case "roomClosed":
      if (frame.room === state.room) {
        state.roomFrame = null; state.room = null; state.drag = null; drawBoard();
        showNotice(`${frame.message}: ${frame.room}`);
      }
      break;
    case "receipt": settle(frame); break;
    case "conversations": state.conversations = frame.conversations; drawChats(); break;
    case "history": takeHistory(frame); break;
    case "workout": state.workouts.set(frame.workout.workoutId, frame); drawWorkouts(); break;
    case "error": toast(`${frame.code}: ${frame.message}`); break;
    case "signedOut": state.socket = null; showSignIn(); break;
  }
}

function settle(receipt) {
  const what = state.refs.get(receipt.ref);
  state.refs.delete(receipt.ref);
  if (receipt.status !== "rejected") return;
  // The server's next room frame carries the rolled-back sticker: it snaps back.
  if (state.drag && what && what.sticker === state.drag.sticker) endDrag(false);
  // Not a member of the room on the board: say so plainly, and offer nothing to edit.
  if (receipt.code === "not_member" && what && what.room && what.room === state.room) {
    state.notMember = state.room;
    drawBoard();
    return;
  }
  // Making a room's photo is tried whenever a room is opened by name and looks empty:
  // in a room that exists it is refused, and that says nothing new.
  if (what && what.quiet) return;
  const sticker = what && what.sticker;
  toast(`${what ? what.label : "refused"}: ${explain(receipt)}`,
    receipt.code === "owned_by_other" && sticker ? () => heldByOther(sticker) : null);
}

function showNotice(text) {
  $("room-notice").textContent = text;
  $("room-notice").hidden = false;
}

function explain(receipt) {
  const known = {
    owned_by_other: "someone else holds it", not_owner: "you do not hold it", not_member: "you are not a member of this room",
    forbidden: "you may not do that here", deleted: "it was deleted", not_found: "it does not exist", rate_limited: "too fast",
  };
  return known[receipt.code] || receipt.message || receipt.code;
}

// ---- Rooms -----------------------------------------------------------------------
function drawRoomList() {
  const list = $("room-list");
  list.replaceChildren(...state.rooms.map((room) => {
    const li = document.createElement("li");
    li.textContent = `${room.roomId} (${room.role})`;
    li.classList.toggle("current", room.roomId === state.room);
    li.addEventListener("click", () => openRoom(room.roomId));
    return li;
  }));
  if (!state.rooms.length) list.innerHTML = "<li><em>none yet</em></li>";
}

function drawPresence() {
  $("presence").replaceChildren(...state.online.map((user) => {
    const li = document.createElement("li");
    li.innerHTML = `<span class="dot"></span>`;
    li.firstChild.style.background = colour(user);
    li.append(user === state.user ? `${user} (you)` : user);
    return li;
  }));
}

$("open-room").addEventListener("submit", (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  openRoom(form.get("room"), form.get("photo"));
});

/// Shows a room; one that does not exist yet is made with the chosen photo.
function openRoom(room, photo) {
  state.room = room;
  state.roomFrame = null;
  state.selected = null;
  state.pendingPhoto = photo || null;
  state.notMember = null;
  $("room-notice").hidden = true;
  send({ type: "watch", room });
  drawBoard();
  drawRoomList();
}

function photoOf(frame) {
  const sticker = frame && frame.stickers.find((s) => s.image.startsWith(PHOTO_PREFIX));
  return sticker ? sticker.image.slice(PHOTO_PREFIX.length) : null;
}

function drawBoard() {
  const frame = state.roomFrame;
  $("room-title").textContent = state.room ? `Room ${state.room}` : "No room open";
  drawMembers(frame);
  // A room seen empty (no snapshot: it does not exist yet) gets its photo when it is made.
  if (frame && !frame.known && state.pendingPhoto) {
    const photo = state.pendingPhoto;
    state.pendingPhoto = null;
    sendWithRef({ type: "edit", room: state.room, op: "create", sticker: PHOTO_STICKER, image: PHOTO_PREFIX + photo,
      frame: { x: 0, y: 0, width: BOARD_W, height: BOARD_H } }, { label: "open room", quiet: true, room: state.room });
    sendWithRef({ type: "edit", room: state.room, op: "release", sticker: PHOTO_STICKER }, { label: "open room", quiet: true, room: state.room });
  }
  // Someone who is not a member sees why, and nothing to edit.
  const outsider = state.room && state.notMember === state.room;
  $("palette").hidden = outsider || !state.room;
  $("board-hint").hidden = outsider || !state.room;
  if (outsider) showNotice(`You are not a member of room ${state.room}: ask its owner to invite you.`);
  else if ($("room-notice").textContent.startsWith("You are not a member")) $("room-notice").hidden = true;
  const photo = photoOf(frame);
  $("photo").style.backgroundImage = photo && /^[a-z]+$/.test(photo) ? `url(photos/${photo}.svg)` : "none";
  const board = $("board");
  for (const old of board.querySelectorAll(".sticker")) old.remove();
  recheckToast();
  if (!frame || outsider) return;
  for (const sticker of frame.stickers) {
    if (sticker.image.startsWith(PHOTO_PREFIX)) continue;
    board.append(drawSticker(sticker));
  }
}

/// The members; the owner may invite and remove them.
function drawMembers(frame) {
  const box = $("room-members");
  box.replaceChildren();
  const owner = frame && frame.owner === state.user;
  $("invite").hidden = !owner;
  if (!frame || !frame.members.length) return;
  box.append("members: ");
  for (const m of frame.members) {
    const span = document.createElement("span");
    span.className = "member";
    span.style.color = colour(m.userId);
    span.textContent = `${m.userId} (${m.role})`;
    if (owner && m.userId !== state.user) {
      const role = document.createElement("select");
      role.title = `${m.userId}'s role`;
      role.dataset.member = m.userId;
      for (const r of ["editor", "viewer"]) role.add(new Option(r, r, false, r === m.role));
      role.addEventListener("change", () =>
        sendWithRef({ type: "member", room: state.room, op: "role", member: m.userId, role: role.value }, { label: `make ${m.userId} ${role.value}` }));
      span.append(role);
      // Removing someone is asked twice: "Remove", then "Remove bob? Yes / No".
      const remove = document.createElement("button");
      remove.textContent = "Remove";
      remove.title = `remove ${m.userId}`;
      remove.className = "remove";
      remove.addEventListener("click", () => {
        const ask = document.createElement("span");
        ask.className = "confirm";
        ask.append(`Remove ${m.userId}? `);
        const yes = document.createElement("button"), no = document.createElement("button");
        yes.textContent = "Yes"; yes.className = "yes";
        no.textContent = "No"; no.className = "no";
        yes.addEventListener("click", () =>
          sendWithRef({ type: "member", room: state.room, op: "remove", member: m.userId }, { label: `remove ${m.userId}` }));
        no.addEventListener("click", () => drawMembers(state.roomFrame));
        ask.append(yes, " ", no);
        remove.replaceWith(ask);
      });
      span.append(remove);
    }
    box.append(span, " ");
  }
}

$("invite").addEventListener("submit", (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  sendWithRef({ type: "member", room: state.room, op: "invite", member: form.get("member"), role: form.get("role") },
    { label: `invite ${form.get("member")}` });
  event.target.reset();
});

function drawSticker(sticker) {
  const drag = state.drag && state.drag.sticker === sticker.id ? state.drag : null;
  const f = drag ? drag.frame : sticker.frame;
  const el = document.createElement("div");
  el.className = "sticker";
  el.dataset.id = sticker.id;
  Object.assign(el.style, {
    left: `${(f.x / BOARD_W) * 100}%`, top: `${(f.y / BOARD_H) * 100}%`,
    width: `${(f.width / BOARD_W) * 100}%`, height: `${(f.height / BOARD_H) * 100}%`,
  });
  const img = document.createElement("img");
  img.alt = sticker.image;
  img.src = STICKERS.includes(sticker.image) ? `stickers/${sticker.image}.svg` : "stickers/star.svg";
  el.append(img);
  if (sticker.owner && sticker.owner !== state.user) {
    el.classList.add("held");
    el.style.borderColor = colour(sticker.owner);
    const lock = document.createElement("span");
    // Under the sticker when above it would leave the board.
    lock.className = f.y < LOCK_ROOM ? "lock below" : "lock";
    lock.textContent = `held by ${sticker.owner}`;
    lock.style.background = colour(sticker.owner);
    el.append(lock);
  } else {
    if (sticker.owner === state.user) { el.classList.add("mine"); el.style.borderColor = colour(state.user); }
    const handle = document.createElement("div");
    handle.className = "handle";
    el.append(handle);
  }
  if (state.selected === sticker.id) el.classList.add("selected");
  el.addEventListener("pointerdown", (event) => beginDrag(event, sticker, event.target.classList.contains("handle") ? "resize" : "move"));
  return el;
}

function stickerById(id) {
  return state.roomFrame && state.roomFrame.stickers.find((s) => s.id === id);
}

// The palette: a click adds that sticker near the middle, not held by anyone.
for (const name of STICKERS) {
  const button = document.createElement("button");
  button.title = `Add ${name}`;
  button.dataset.sticker = name;
  button.innerHTML = `<img src="stickers/${name}.svg" alt="${name}">`;
  button.addEventListener("click", () => {
    if (!state.room) { toast("open a room first"); return; }
    const id = `s-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 6)}`;
    const size = 120;
    const jitter = () => Math.round((Math.random() - 0.5) * 200);
    sendWithRef({ type: "edit", room: state.room, op: "create", sticker: id, image: name,
      frame: { x: BOARD_W / 2 - size / 2 + jitter(), y: BOARD_H / 2 - size / 2 + jitter(), width: size, height: size } },
      { label: `add ${name}`, sticker: id });
    sendWithRef({ type: "edit", room: state.room, op: "release", sticker: id }, { label: `add ${name}`, sticker: id });
    state.selected = id;
  });
  $("palette").append(button);
}

// ---- Dragging: acquire on pointer down, updates at most every 50 ms, release on up ---
function beginDrag(event, sticker, mode) {
  event.preventDefault();
  state.selected = sticker.id;
  $("board").focus();
  if (sticker.owner && sticker.owner !== state.user) {
    toast(`${sticker.owner} is holding this sticker`, () => heldByOther(sticker.id));
    drawBoard();
    return;
  }
  const rect = $("board").getBoundingClientRect();
  state.drag = {
    sticker: sticker.id, mode, scale: BOARD_W / rect.width,
    start: { x: event.clientX, y: event.clientY }, origin: { ...sticker.frame }, frame: { ...sticker.frame },
    dirty: false, timer: null,
  };
  sendWithRef({ type: "edit", room: state.room, op: "acquire", sticker: sticker.id }, { label: "take", sticker: sticker.id });
  // Taking it answers any message about someone else holding it.
  if (toast.stillTrue) { $("toast").hidden = true; toast.stillTrue = null; }
  drawBoard();
}

/// A frame kept on the photo: never larger than the board, never partly off it.
function onBoard(frame) {
  const width = Math.min(frame.width, BOARD_W), height = Math.min(frame.height, BOARD_H);
  return { ...frame, width, height,
    x: Math.min(Math.max(0, frame.x), BOARD_W - width), y: Math.min(Math.max(0, frame.y), BOARD_H - height) };
}

document.addEventListener("pointermove", (event) => {
  const drag = state.drag;
  if (!drag) return;
  const dx = (event.clientX - drag.start.x) * drag.scale, dy = (event.clientY - drag.start.y) * drag.scale;
  if (drag.mode === "move") {
    drag.frame = onBoard({ ...drag.frame, x: Math.round(drag.origin.x + dx), y: Math.round(drag.origin.y + dy) });
  } else {
    drag.frame.width = Math.min(Math.max(20, Math.round(drag.origin.width + dx)), BOARD_W - drag.frame.x);
    drag.frame.height = Math.min(Math.max(20, Math.round(drag.origin.height + dy)), BOARD_H - drag.frame.y);
  }
  drag.dirty = true;
  scheduleUpdate();
  drawBoard();
});

/// Coalesces: the latest frame goes out at most once every UPDATE_INTERVAL_MS.
function scheduleUpdate() {
  const drag = state.drag;
  if (!drag || drag.timer) return;
  flushUpdate();
  drag.timer = setTimeout(() => { if (state.drag === drag) { drag.timer = null; if (drag.dirty) scheduleUpdate(); } }, UPDATE_INTERVAL_MS);
}

function flushUpdate() {
  const drag = state.drag;
  if (!drag || !drag.dirty) return;
  drag.dirty = false;
  sendWithRef({ type: "edit", room: state.room, op: "update", sticker: drag.sticker, frame: { ...drag.frame } },
    { label: "move", sticker: drag.sticker });
}

document.addEventListener("pointerup", () => { if (state.drag) endDrag(true); });
document.addEventListener("pointercancel", () => { if (state.drag) endDrag(true); });

function endDrag(release) {
  const drag = state.drag;
  if (release) {
    flushUpdate();
    sendWithRef({ type: "edit", room: state.room, op: "release", sticker: drag.sticker }, { label: "let go", sticker: drag.sticker });
  }
  clearTimeout(drag.timer);
  state.drag = null;
  drawBoard();
}

// ---- Keyboard: arrows move the selected sticker, Delete removes it ------------------
$("board").addEventListener("keydown", (event) => {
  const sticker = stickerById(state.selected);
  if (!sticker || state.drag) return;
  const steps = { ArrowLeft: [-10, 0], ArrowRight: [10, 0], ArrowUp: [0, -10], ArrowDown: [0, 10] };
  if (sticker.owner && sticker.owner !== state.user && (steps[event.key] || event.key === "Delete")) {
    toast(`${sticker.owner} is holding this sticker`, () => heldByOther(sticker.id));
    return;
  }
  if (steps[event.key]) {
    event.preventDefault();
    const [dx, dy] = steps[event.key];
    // Presses quicker than the room's frames build on the last one sent.
    const last = state.keyMove && state.keyMove.sticker === sticker.id && Date.now() - state.keyMove.at < 1500 ? state.keyMove.frame : null;
    const base = last || sticker.frame;
    const frame = onBoard({ ...base, x: base.x + dx, y: base.y + dy });
    state.keyMove = { sticker: sticker.id, frame, at: Date.now() };
    sendWithRef({ type: "edit", room: state.room, op: "update", sticker: sticker.id, frame }, { label: "move", sticker: sticker.id });
    sendWithRef({ type: "edit", room: state.room, op: "release", sticker: sticker.id }, { label: "let go", sticker: sticker.id });
  } else if (event.key === "Delete" || event.key === "Backspace") {
    event.preventDefault();
    sendWithRef({ type: "edit", room: state.room, op: "delete", sticker: sticker.id }, { label: "remove", sticker: sticker.id });
    state.selected = null;
  }
});

// ---- Chats -----------------------------------------------------------------------
for (const button of document.querySelectorAll(".tabs button")) {
  button.addEventListener("click", () => {
    for (const other of document.querySelectorAll(".tabs button")) other.classList.toggle("active", other === button);
    for (const view of ["rooms", "chats", "workouts"]) $(`view-${view}`).hidden = button.dataset.view !== view;
    if (button.dataset.view === "chats") drawChats();
  });
}

function drawChats() {
  const total = state.conversations.reduce((sum, c) => sum + c.unread, 0);
  $("unread-total").hidden = total === 0;
  $("unread-total").textContent = total;
  $("chat-list").replaceChildren(...state.conversations.map((c) => {
    const li = document.createElement("li");
    li.classList.toggle("current", c.peer === state.chat);
    li.innerHTML = `<span class="dot"></span>`;
    li.firstChild.style.background = colour(c.peer);
    li.append(`${c.peer} · ${c.status}`);
    if (c.unread) {
      const badge = document.createElement("span");
      badge.className = "badge";
      badge.textContent = c.unread;
      li.append(badge);
    }
    li.addEventListener("click", () => { state.chat = c.peer; drawChats(); });
    return li;
  }));
  drawChat();
}

/// The messages shown for `c`: older pages from history frames, then the latest ones the
/// conversation frame carries (a message in both is shown once, as the latest says).
function messagesOf(c) {
  const latest = new Map(c.messages.map((m) => [m.id, m]));
  const older = (state.older.get(c.peer) || []).filter((m) => !latest.has(m.id));
  return [...older, ...c.messages];
}

function drawChat() {
  const c = state.conversations.find((x) => x.peer === state.chat);
  $("chat-title").textContent = c ? `${c.peer} (${c.status})` : (state.chat ? `${state.chat} (asked)` : "No conversation open");
  const actions = $("chat-actions");
  actions.replaceChildren();
  if (c && c.status === "received") {
    for (const op of ["accept", "decline"]) {
      const button = document.createElement("button");
      button.textContent = op[0].toUpperCase() + op.slice(1);
      button.addEventListener("click", () => sendWithRef({ type: "dm", op, peer: c.peer }, { label: op }));
      actions.append(button);
    }
  }
  $("send-message").hidden = !c || c.status !== "active";
  const list = $("messages");
  const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 8;
  const messages = c ? messagesOf(c) : [];
  const items = messages.map((m) => {
    const li = document.createElement("li");
    li.dataset.id = m.id;
    li.classList.toggle("mine", m.sender === state.user);
    const meta = document.createElement("div");
    meta.className = "meta";
    const mark = m.sender === state.user ? (m.isRead ? " · ✓✓ read" : " · ✓ sent") : "";
    meta.textContent = `${m.sender} · ${new Date(m.sentAt).toLocaleTimeString()}${mark}`;
    li.append(meta, m.text);
    return li;
  });
  if (c && (c.hasOlder || state.older.has(c.peer))) {
    const marker = document.createElement("li");
    marker.className = "older-marker";
    marker.textContent = state.noOlder.has(c.peer) ? "the start of the conversation" : "scroll up for older messages";
    items.unshift(marker);
  }
  list.replaceChildren(...items);
  if (atBottom || !list.dataset.peer || list.dataset.peer !== (c && c.peer)) list.scrollTop = list.scrollHeight;
  list.dataset.peer = c ? c.peer : "";
  // Shown on screen: read (once per unread count: the next frame says it is done).
  if (c && c.unread > 0 && !$("view-chats").hidden && c.status === "active" && state.readAsked.get(c.peer) !== c.unread) {
    state.readAsked.set(c.peer, c.unread);
    sendWithRef({ type: "dm", op: "read", peer: c.peer }, { label: "read" });
  }
}

// Older history on scroll: at the top, the page before the oldest message shown.
$("messages").addEventListener("scroll", () => {
  const c = state.conversations.find((x) => x.peer === state.chat);
  if (!c || $("messages").scrollTop > 4) return;
  askOlder(c);
});

function askOlder(c) {
  if (state.noOlder.has(c.peer) || state.askedOlder.has(c.peer)) return;
  if (!c.hasOlder && !state.older.has(c.peer)) return;
  const oldest = messagesOf(c)[0];
  state.askedOlder.add(c.peer);
  // Up to and including the oldest one's millisecond: messages sent in the same one are
  // not skipped (the page drops the ones it holds).
  send({ type: "history", peer: c.peer, ...(oldest ? { before: oldest.sentAt + 1 } : {}) });
}

function takeHistory(frame) {
  state.askedOlder.delete(frame.peer);
  const list = $("messages");
  const before = list.scrollHeight;
  const held = state.older.get(frame.peer) || [];
  const known = new Set(held.map((m) => m.id));
  state.older.set(frame.peer, [...frame.messages.filter((m) => !known.has(m.id)), ...held]);
  if (!frame.hasMore) state.noOlder.add(frame.peer);
  if (frame.peer !== state.chat) return;
  drawChat();
  list.scrollTop += list.scrollHeight - before;   // the message read stays where it was
}

// ---- Workouts: a live card each, from the snapshots ---------------------------------
function clock(seconds) {
  const s = Math.max(0, Math.round(seconds || 0));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
  return `${h ? `${h}:` : ""}${String(m).padStart(h ? 2 : 1, "0")}:${String(r).padStart(2, "0")}`;
}

function pace(secondsPerKm) {
  return secondsPerKm && isFinite(secondsPerKm) && secondsPerKm > 0 ? `${clock(secondsPerKm)} /km` : "–";
}

function drawWorkouts() {
  const cards = [...state.workouts.values()].sort((a, b) => b.workout.startedAt - a.workout.startedAt);
  $("no-workouts").hidden = cards.length > 0;
  for (const old of document.querySelectorAll(".workout")) old.remove();
  for (const { workout: w, heartRates } of cards) {
    const card = document.createElement("article");
    card.className = "workout";
    card.dataset.id = w.workoutId;
    const flight = w.flight || {}, health = w.health || {};
    const distance = w.summary ? w.summary.distance : flight.distance;
    const rows = [
      ["status", w.status], ["origin", `${w.origin} (${w.mode})`], ["elapsed", clock(w.elapsedTime)],
      ["distance", distance != null ? `${(distance / 1000).toFixed(2)} km` : "–"],
      ["pace", pace(w.summary ? w.summary.averagePace : flight.pace)],
      ["heart rate", health.heartRate != null ? `${Math.round(health.heartRate)} bpm` : "–"],
    ];
    const title = document.createElement("h3");
    title.append(w.workoutId);
    const badge = document.createElement("span");
    badge.className = `status ${w.status}`;
    badge.textContent = w.status;
    title.append(badge);
    const dl = document.createElement("dl");
    for (const [name, value] of rows) {
      const dt = document.createElement("dt"), dd = document.createElement("dd");
      dt.textContent = name;
      dd.textContent = value;
      dd.dataset.field = name.replace(" ", "-");
      dl.append(dt, dd);
    }
    card.append(title, dl, heartLine(heartRates));
    $("workout-cards").append(card);
  }
}

/// The heart rates as a line, scaled to their own range.
function heartLine(points) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 300 60");
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("aria-label", `heart rate: ${points.length} samples`);
  if (points.length >= 2) {
    const t0 = points[0][0], t1 = points[points.length - 1][0];
    const lo = Math.min(...points.map((p) => p[1])) - 5, hi = Math.max(...points.map((p) => p[1])) + 5;
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", points.map(([t, v]) =>
      `${(((t - t0) / Math.max(1, t1 - t0)) * 300).toFixed(1)},${(60 - ((v - lo) / (hi - lo)) * 60).toFixed(1)}`).join(" "));
    svg.append(line);
  }
  return svg;
}

$("new-chat").addEventListener("submit", (event) => {
  event.preventDefault();
  const peer = new FormData(event.target).get("peer");
  state.chat = peer;
  sendWithRef({ type: "dm", op: "request", peer }, { label: `ask ${peer}` });
  event.target.reset();
});

$("send-message").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = event.target.text.value;
  if (!state.chat || !text) return;
  sendWithRef({ type: "dm", op: "message", peer: state.chat, text }, { label: "message" });
  event.target.reset();
});

boot();
