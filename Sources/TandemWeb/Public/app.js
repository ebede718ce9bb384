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
const CURSOR_INTERVAL_MS = 50;                 // own pointer: at most 20 a second
const CURSOR_IDLE_MS = 4000;                   // another's pointer that stops moving fades after this
const HISTORY_REFRESH_MS = 1000;               // the open history asks again at most once a second
const STICKER_KINDS = ["create", "acquire", "update", "release", "delete"];

const $ = (id) => document.getElementById(id);
const state = {
  user: null, socket: null, nextRef: 1, refs: new Map(),
  rooms: [], online: [], room: null, roomFrame: null, selected: null,
  drag: null,                                  // {sticker, mode, start, frame, sent, timer}
  settling: null,                              // {sticker, frame, until}: a drag let go, shown where it ended until the room says so
  conversations: [], chat: null,
  older: new Map(),                            // peer -> older messages from history frames (oldest first)
  noOlder: new Set(),                          // peers whose history has nothing older
  askedOlder: new Set(),                       // peers with a history frame on its way
  readAsked: new Map(),                        // peer -> unread count a read was sent for
  workouts: new Map(),                         // workoutId -> {workout, heartRates}
  images: new Map(),                           // sticker id -> image, of every sticker seen (the history names them)
  cursors: new Map(),                          // userId -> {el, timer}: other members' pointers on the board
  myCursor: { room: null, next: undefined, timer: null, shown: false },
  history: { open: false, room: null, entries: new Map(), version: 0, oldest: 1, hasMore: false, olderLoaded: false,
             refreshing: false, again: false, loadingOlder: false, lastAsked: 0, timer: null, error: null },
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
    case "presence":
      state.online = frame.online; drawPresence();
      for (const user of state.cursors.keys()) if (!state.online.includes(user)) hideCursor(user);
      if (state.roomFrame) drawBoard();
      break;
    case "room": if (frame.room === state.room) takeRoom(frame); break;
    case "roomClosed":
      if (frame.room === state.room) {
        if (state.drag) forgetDragRef(state.drag);
        state.roomFrame = null; state.room = null; state.drag = null;
        leaveRoomExtras();
        drawBoard();
        showNotice(`${frame.message}: ${frame.room}`);
      }
      break;
    case "undoResult": settleUndo(frame); break;
    case "roomHistory": takeRoomHistory(frame); break;
    case "cursor": takeCursor(frame); break;
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
  // A drag's continuing updates share one ref, kept until its release is answered.
  if (!what || !what.drag) state.refs.delete(receipt.ref);
  if (what && what.settled) what.settled();
  if (receipt.status !== "rejected") {
    if (what && what.accepted) what.accepted();
    return;
  }
  // Only the first of a drag's refused updates says so: those sent meanwhile follow it.
  if (what && what.drag) {
    if (what.refused) return;
    what.refused = true;
  }
  // The server's next room frame carries the rolled-back sticker: it snaps back.
  if (state.drag && what && what.sticker === state.drag.sticker) endDrag(false);
  if (state.settling && what && what.sticker === state.settling.sticker) { state.settling = null; drawBoard(); }
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
    history_gone: "that version is no longer kept", room_full: "the room has no space for more stickers",
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
  if (room !== state.room) leaveRoomExtras();
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
  $("tools").hidden = outsider || !state.room || !frame || !frame.known;
  $("board-hint").hidden = outsider || !state.room;
  const editor = canEdit(frame);
  $("undo").disabled = !(editor && frame.canUndo);
  $("redo").disabled = !(editor && frame.canRedo);
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
      // Removing someone is asked twice: "Remove", then, over the board where nothing
      // cuts it off, "Remove bob from this room? Yes, remove / No".
      const remove = document.createElement("button");
      remove.textContent = "Remove";
      remove.title = `remove ${m.userId}`;
      remove.className = "remove";
      remove.addEventListener("click", () => askToRemove(m.userId));
      span.append(remove);
    }
    box.append(span, " ");
  }
}

/// "Remove `user` from this room?" with Yes and No, over the top of the board.
function askToRemove(user) {
  const ask = $("room-confirm");
  ask.replaceChildren(`Remove ${user} from this room? `);
  const yes = document.createElement("button"), no = document.createElement("button");
  yes.textContent = "Yes, remove"; yes.className = "yes";
  no.textContent = "No"; no.className = "no";
  yes.addEventListener("click", () => {
    ask.hidden = true;
    sendWithRef({ type: "member", room: state.room, op: "remove", member: user }, { label: `remove ${user}` });
  });
  no.addEventListener("click", () => { ask.hidden = true; });
  ask.append(yes, " ", no);
  ask.hidden = false;
  yes.focus();
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
  const settling = state.settling && state.settling.sticker === sticker.id ? state.settling : null;
  const f = drag ? drag.frame : settling ? settling.frame : sticker.frame;
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
    el.style.outlineColor = colour(sticker.owner);
    const lock = document.createElement("span");
    // Under the sticker when above it would leave the board.
    lock.className = f.y < LOCK_ROOM ? "lock below" : "lock";
    lock.textContent = `held by ${sticker.owner}`;
    lock.style.background = colour(sticker.owner);
    el.append(lock);
  } else {
    if (sticker.owner === state.user) { el.classList.add("mine"); el.style.outlineColor = colour(state.user); }
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
  const update = { type: "edit", room: state.room, op: "update", sticker: drag.sticker, frame: { ...drag.frame } };
  if (!drag.updated) {
    sendWithRef(update, { label: "move", sticker: drag.sticker });
    drag.updated = true;
    return;
  }
  // The drag's later updates continue its first: one undo takes back the whole drag. They
  // share one ref, and the server answers them only with a refusal (the page shows the
  // drag itself: an acceptance twenty times a second would say nothing).
  if (!drag.ref) {
    drag.ref = `r${state.nextRef++}`;
    state.refs.set(drag.ref, { label: "move", sticker: drag.sticker, drag: true });
  }
  send({ ...update, continues: true, ref: drag.ref });
}

document.addEventListener("pointerup", () => { if (state.drag) endDrag(true); });
document.addEventListener("pointercancel", () => { if (state.drag) endDrag(true); });

/// A drag's continuing updates share one ref: answers still under way for them (only
/// refusals come) are waited for a while, then it goes.
function forgetDragRef(drag) {
  if (drag.ref) setTimeout(() => state.refs.delete(drag.ref), 10000);
}

function endDrag(release) {
  const drag = state.drag;
  if (release) {
    flushUpdate();
    // Its answer usually comes after the continuing updates' (one room, in timestamp
    // order); not always (a refusal at once, a late one): their ref goes a while after.
    sendWithRef({ type: "edit", room: state.room, op: "release", sticker: drag.sticker },
      { label: "let go", sticker: drag.sticker, settled: () => forgetDragRef(drag) });
    // The room shows a drag's updates as they are applied: until the last one is, the
    // sticker stays where it was let go (it does not jump back a step).
    if (drag.updated) {
      state.settling = { sticker: drag.sticker, frame: { ...drag.frame }, until: Date.now() + 2000 };
      setTimeout(() => { if (state.settling && Date.now() >= state.settling.until) { state.settling = null; drawBoard(); } }, 2100);
    }
  } else {
    forgetDragRef(drag);
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

// ---- The room frame: the board, what can be undone, the history, the pointers ---------
function takeRoom(frame) {
  const before = state.roomFrame;
  state.roomFrame = frame;
  const settling = state.settling;
  if (settling) {
    const s = frame.stickers.find((x) => x.id === settling.sticker);
    const f = s && s.frame, g = settling.frame;
    if (!s || Date.now() >= settling.until || (s.owner && s.owner !== state.user)
        || (f.x === g.x && f.y === g.y && f.width === g.width && f.height === g.height)) state.settling = null;
  }
  for (const s of frame.stickers) state.images.set(s.id, s.image);
  // Someone who is no longer a member has no pointer here.
  for (const user of state.cursors.keys()) if (!frame.members.some((m) => m.userId === user)) hideCursor(user);
  drawBoard();
  if (!state.history.open) return;
  if (!before || before.version !== frame.version) refreshHistory();
  if (canEdit(before) !== canEdit(frame)) drawHistory();
}

/// Whether this person may change the room (owner or editor; not a viewer).
function canEdit(frame) {
  const me = frame && frame.members.find((m) => m.userId === state.user);
  return !!(me && me.role !== "viewer");
}

/// What belongs to the room shown: its pointers, the own pointer there, its history.
function leaveRoomExtras() {
  for (const user of [...state.cursors.keys()]) hideCursor(user);
  offerCursor(null);
  showHistory(false);
  state.history.entries = new Map();
  state.history.room = null;
}

// ---- Undo and redo: the person's own changes, through the session's client ---------
function undoRedo(op) {
  const frame = state.roomFrame;
  if (!state.room || !frame || state.drag || !canEdit(frame)) return;
  // An edit still waiting for its receipt may be what there is to undo (the server's
  // undo waits for it): only with none is "nothing to undo" said here.
  if (!(op === "undo" ? frame.canUndo || state.refs.size : frame.canRedo)) { toast(`nothing to ${op}`); return; }
  sendWithRef({ type: op, room: state.room }, { label: op, room: state.room });
}

$("undo").addEventListener("click", () => undoRedo("undo"));
$("redo").addEventListener("click", () => undoRedo("redo"));

// Ctrl+Z, Ctrl+Shift+Z and Ctrl+Y (Cmd on a Mac), on the board's view; a text field keeps
// its own undo.
document.addEventListener("keydown", (event) => {
  if (!(event.ctrlKey || event.metaKey) || event.altKey) return;
  const target = event.target;
  if (target && (["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName) || target.isContentEditable)) return;
  if ($("view-rooms").hidden || !state.room) return;
  const key = event.key.toLowerCase();
  if (key === "z") { event.preventDefault(); undoRedo(event.shiftKey ? "redo" : "undo"); }
  else if (key === "y" && !event.shiftKey) { event.preventDefault(); undoRedo("redo"); }
});

function settleUndo(result) {
  state.refs.delete(result.ref);
  if (result.status === "nothing") { toast(`nothing to ${result.op}`); return; }
  if (result.status !== "rejected") return;
  if (result.code === "owned_by_other") {
    const sticker = result.sticker;
    if (sticker && stickerById(sticker)) { state.selected = sticker; drawBoard(); }
    toast(`can't ${result.op}: ${result.holder || "someone else"} is holding that sticker`,
      sticker ? () => heldByOther(sticker) : null);
    return;
  }
  toast(`can't ${result.op}: ${explain(result)}`);
}

// ---- History: who did what, newest first; restore a version -----------------------
$("history-toggle").addEventListener("click", () => showHistory(!state.history.open));
$("history-close").addEventListener("click", () => showHistory(false));
$("history-more").addEventListener("click", () => olderHistory());

function showHistory(open) {
  const h = state.history;
  h.open = open && !!state.room;
  $("history-panel").hidden = !h.open;
  $("history-toggle").setAttribute("aria-expanded", String(h.open));
  drawHistory.shown = null;
  if (!h.open) return;
  if (h.room !== state.room) {
    Object.assign(h, { room: state.room, entries: new Map(), version: 0, oldest: 1, hasMore: false, olderLoaded: false, error: null });
  }
  refreshHistory();
  drawHistory();
}

/// Asks for the newest page; while one is on its way, or within a second of the last,
/// the next ask waits (a drag changes the room twenty times a second).
function refreshHistory() {
  const h = state.history;
  if (!h.open || h.room !== state.room) return;
  if (h.refreshing) { h.again = true; return; }
  const wait = h.lastAsked + HISTORY_REFRESH_MS - Date.now();
  if (wait > 0) {
    if (!h.timer) h.timer = setTimeout(() => { h.timer = null; refreshHistory(); }, wait);
    return;
  }
  h.refreshing = true;
  h.lastAsked = Date.now();
  send({ type: "roomHistory", room: h.room });
}

function olderHistory() {
  const h = state.history;
  if (h.loadingOlder || !h.hasMore || !h.entries.size) return;
  h.loadingOlder = true;
  send({ type: "roomHistory", room: h.room, before: Math.min(...h.entries.keys()) });
  drawHistory();
}

function takeRoomHistory(frame) {
  const h = state.history;
  if (frame.room !== h.room) return;
  const newest = frame.before == null;
  if (newest) {
    h.refreshing = false;
    if (h.again) { h.again = false; refreshHistory(); }
  } else {
    h.loadingOlder = false;
  }
  if (frame.error) { h.error = `the history could not be read: ${frame.error.message}`; drawHistory(); return; }
  h.error = null;
  const held = h.entries.size ? Math.max(...h.entries.keys()) : 0;
  // A newest page that does not reach what is held (more changes than a page since the
  // last ask) starts the list again: no gap is ever shown.
  if (newest && held && frame.hasMore && frame.entries.length && frame.entries[frame.entries.length - 1].version > held + 1) {
    h.entries = new Map();
    h.olderLoaded = false;
  }
  for (const entry of frame.entries) h.entries.set(entry.version, entry);
  h.version = Math.max(h.version, frame.version);
  h.oldest = frame.oldest;
  if (!newest) { h.olderLoaded = true; h.hasMore = frame.hasMore; }
  else if (!h.olderLoaded) h.hasMore = frame.hasMore;
  drawHistory();
}

/// The entries as people think of them: one row per action, newest first. What one
/// person does to one sticker in a row, from taking it (or making it) to letting it go,
/// is one row: a drag (take, moves, let go), a sticker added (make, let go), an arrow
/// key's move or an undo (move, let go). Rows of nothing but taking and letting go, and
/// locks that ran out, are not shown: they change no picture (a restore releases every
/// lock anyway).
function historyRows() {
  const entries = [...state.history.entries.values()].sort((a, b) => a.version - b.version);
  const rows = [];
  let open = null;                               // the row still taking entries
  for (const e of entries) {
    const sticker = STICKER_KINDS.includes(e.type) ? e.stickerId : null;
    if (open && sticker && open.sticker === sticker && open.user === e.userId && open.version === e.version - 1) {
      open.types.add(e.type);
      open.version = e.version;
      open.time = e.timestamp;
      if (e.type === "create" || e.type === "delete") open.major = e.type;
    } else {
      open = { version: e.version, user: e.userId, type: e.type, sticker, types: new Set([e.type]), time: e.timestamp,
        major: e.type === "create" || e.type === "delete" ? e.type : null };
      rows.push(open);
    }
    // Letting go (or removing) ends the action; so does anything that is not a sticker's.
    if (!sticker || e.type === "release" || e.type === "delete") open = null;
  }
  return rows.reverse()
    .filter((r) => r.type !== "expire" && !(r.sticker && [...r.types].every((t) => t === "acquire" || t === "release")));
}

function stickerName(id) {
  if (id === PHOTO_STICKER) return "photo";
  const image = state.images.get(id);
  if (!image) return "sticker";
  return image.startsWith(PHOTO_PREFIX) ? "photo" : image;
}

function describe(row) {
  const name = row.sticker && stickerName(row.sticker);
  if (row.major === "create") return name === "photo" ? "set the photo" : `added a ${name}`;
  if (row.major === "delete") return `removed the ${name}`;
  if (row.types.has("update")) return `moved the ${name}`;
  return {
    restore: "restored an earlier version", invite: "invited a member", remove: "removed a member",
    role: "changed a member's role", leave: "left the room",
  }[row.type] || row.type;
}

function drawHistory() {
  const h = state.history;
  if (!h.open) return;
  const frame = state.roomFrame;
  const editor = canEdit(frame);
  const current = Math.max(h.version, frame ? frame.version : 0);
  const rows = historyRows();
  // Asked again every second while the room changes: the list is rebuilt only when what
  // it shows changed (a button under the pointer stays where it is).
  const shown = JSON.stringify([editor, current, h.oldest, rows.map((r) => [r.version, r.user, describe(r), r.time])]);
  if (shown !== drawHistory.shown) {
    drawHistory.shown = shown;
    // The rows in view stay in view as newer ones come on top (unless the list is at
    // its top, where the newest are what one looks at).
    const list = $("history-list");
    const anchor = list.scrollTop > 4 && !h.toTop
      ? [...list.children].find((li) => li.offsetTop + li.offsetHeight > list.scrollTop) : null;
    const anchorOffset = anchor ? anchor.offsetTop - list.scrollTop : 0;
    const anchorVersion = anchor && anchor.dataset.version;
    list.replaceChildren(...rows.map((row, index) => {
      const li = document.createElement("li");
      li.dataset.version = row.version;
      const what = document.createElement("span");
      what.className = "what";
      const who = document.createElement("span");
      who.className = "who";
      who.textContent = row.user || "the server";
      if (row.user) who.style.color = colour(row.user);
      what.append(who, ` ${describe(row)}`);
      const when = document.createElement("span");
      when.className = "when";
      when.textContent = new Date(row.time).toLocaleTimeString();
      when.title = `version ${row.version}`;
      li.append(what, when);
      if (index === 0 && row.version <= current) {
        const now = document.createElement("span");
        now.className = "now";
        now.textContent = "now";
        li.append(now);
      } else if (editor && row.version >= h.oldest && row.version < current) {
        const restore = document.createElement("button");
        restore.className = "restore";
        restore.textContent = "Restore this version";
        restore.title = `make the room what it was right after this change (version ${row.version})`;
        restore.addEventListener("click", () => {
          const at = new Date(row.time).toLocaleTimeString();
          sendWithRef({ type: "restore", room: state.room, version: row.version }, { label: "restore", room: state.room,
            accepted: () => { toast(`restored the room to how it was at ${at}`); state.history.toTop = true; } });
        });
        li.append(restore);
      }
      return li;
    }));
    const again = anchorVersion && list.querySelector(`li[data-version="${anchorVersion}"]`);
    if (again) list.scrollTop = again.offsetTop - anchorOffset;
  }
  // After one's own restore: the top, where it now is.
  if (h.toTop && rows.length && rows[0].type === "restore") { $("history-list").scrollTop = 0; h.toTop = false; }
  const status = h.error || (h.refreshing && !rows.length ? "loading…"
    : !rows.length ? "no changes yet" : h.olderLoaded && !h.hasMore ? "the start of the room" : "");
  $("history-status").textContent = status;
  $("history-more").hidden = !h.hasMore;
  $("history-more").disabled = h.loadingOlder;
  $("history-more").textContent = h.loadingOlder ? "Loading…" : "More";
}

// ---- Pointers: the others' over the photo, and this person's to them ----------------
function takeCursor(frame) {
  if (frame.room !== state.room || frame.user === state.user) return;
  if (frame.x == null || frame.y == null) { hideCursor(frame.user); return; }
  if (state.roomFrame && !state.roomFrame.members.some((m) => m.userId === frame.user)) return;
  let cursor = state.cursors.get(frame.user);
  if (!cursor) {
    const el = document.createElement("div");
    el.className = "cursor";
    el.dataset.user = frame.user;
    el.innerHTML = `<svg viewBox="0 0 18 22"><path d="M1 1 L1 17 L5.5 13 L8.5 20 L11 19 L8 12 L14 12 Z" stroke="#fff" stroke-width="1.5" stroke-linejoin="round"/></svg><span class="name"></span>`;
    el.querySelector("path").setAttribute("fill", colour(frame.user));
    const name = el.querySelector(".name");
    name.textContent = frame.user;
    name.style.background = colour(frame.user);
    $("board").append(el);
    cursor = { el, timer: null };
    state.cursors.set(frame.user, cursor);
  }
  const x = Math.min(Math.max(frame.x, 0), BOARD_W), y = Math.min(Math.max(frame.y, 0), BOARD_H);
  Object.assign(cursor.el.style, { left: `${(x / BOARD_W) * 100}%`, top: `${(y / BOARD_H) * 100}%` });
  // Near the right or the bottom edge the name goes to the other side, not off the photo.
  cursor.el.classList.toggle("flip-x", x > BOARD_W * 0.85);
  cursor.el.classList.toggle("flip-y", y > BOARD_H * 0.9);
  clearTimeout(cursor.timer);
  cursor.timer = setTimeout(() => hideCursor(frame.user), CURSOR_IDLE_MS);
}

function hideCursor(user) {
  const cursor = state.cursors.get(user);
  if (!cursor) return;
  clearTimeout(cursor.timer);
  cursor.el.remove();
  state.cursors.delete(user);
}

/// This person's pointer: `position` in board units, or null when it left the photo. At
/// most one frame every CURSOR_INTERVAL_MS, the latest always sent (where it stopped, or
/// that it left).
function offerCursor(position) {
  const mine = state.myCursor;
  if (position && !state.room) return;
  if (!position && !mine.shown && mine.next === undefined) return;
  mine.next = position;
  if (!mine.timer) flushCursor();
}

function flushCursor() {
  const mine = state.myCursor;
  if (mine.next === undefined) { mine.timer = null; return; }
  const position = mine.next;
  mine.next = undefined;
  if (position) {
    if (mine.shown && mine.room !== state.room) send({ type: "cursor", room: mine.room });
    send({ type: "cursor", room: state.room, x: position.x, y: position.y });
    mine.room = state.room;
    mine.shown = true;
  } else if (mine.shown) {
    send({ type: "cursor", room: mine.room });
    mine.shown = false;
  }
  mine.timer = setTimeout(flushCursor, CURSOR_INTERVAL_MS);
}

$("board").addEventListener("pointermove", (event) => {
  if (!state.roomFrame || state.notMember === state.room) return;
  const rect = $("board").getBoundingClientRect();
  const x = ((event.clientX - rect.left) / rect.width) * BOARD_W, y = ((event.clientY - rect.top) / rect.height) * BOARD_H;
  if (x < 0 || y < 0 || x > BOARD_W || y > BOARD_H) { offerCursor(null); return; }
  offerCursor({ x: Math.round(x * 10) / 10, y: Math.round(y * 10) / 10 });
});
$("board").addEventListener("pointerleave", () => offerCursor(null));

// ---- Download: the photo and its stickers as people see them, as a PNG ----------------
const svgTexts = new Map();

/// The picture at `url` drawn over `frame` (board units), as an <img> of that size shows
/// it: the SVG is given the frame's size, so its own aspect rule applies, not a stretch.
async function drawPicture(context, url, frame) {
  if (!svgTexts.has(url)) {
    const answer = await fetch(url);
    if (!answer.ok) throw new Error(`${url}: ${answer.status}`);
    svgTexts.set(url, await answer.text());
  }
  const svg = new DOMParser().parseFromString(svgTexts.get(url), "image/svg+xml").documentElement;
  svg.setAttribute("width", frame.width);
  svg.setAttribute("height", frame.height);
  const blob = new Blob([new XMLSerializer().serializeToString(svg)], { type: "image/svg+xml" });
  const link = URL.createObjectURL(blob);
  try {
    const image = new Image();
    await new Promise((done, fail) => { image.onload = done; image.onerror = () => fail(new Error(`${url} did not load`)); image.src = link; });
    context.drawImage(image, frame.x, frame.y, frame.width, frame.height);
  } finally {
    URL.revokeObjectURL(link);
  }
}

async function downloadPhoto() {
  const frame = state.roomFrame;
  if (!frame || !state.room) return;
  const room = state.room;
  const canvas = document.createElement("canvas");
  canvas.width = BOARD_W;
  canvas.height = BOARD_H;
  const context = canvas.getContext("2d");
  context.fillStyle = "#d1d5db";                 // the board's own grey where no photo is
  context.fillRect(0, 0, BOARD_W, BOARD_H);
  try {
    const photo = photoOf(frame);
    if (photo && /^[a-z]+$/.test(photo)) await drawPicture(context, `photos/${photo}.svg`, { x: 0, y: 0, width: BOARD_W, height: BOARD_H });
    for (const sticker of frame.stickers) {
      if (sticker.image.startsWith(PHOTO_PREFIX)) continue;
      const f = state.drag && state.drag.sticker === sticker.id ? state.drag.frame : sticker.frame;
      await drawPicture(context, `stickers/${STICKERS.includes(sticker.image) ? sticker.image : "star"}.svg`, f);
    }
  } catch (error) {
    toast(`download failed: ${error.message}`);
    return;
  }
  const blob = await new Promise((done) => canvas.toBlob(done, "image/png"));
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = `${room}.png`;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 60_000);
}

$("download").addEventListener("click", () => downloadPhoto());

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
