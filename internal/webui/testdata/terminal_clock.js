// Runs static/terminal.js (argv[2]) in node with the browser stubbed out
// and its clocks and timers virtual, through scenario argv[3], in which
// the wall clock steps (NTP setting it as a laptop wakes) while the page
// resumes its terminal. Exit 0 when the page does what it should; else it
// says what it did and exits 1. TestTerminalOutlivesClockSteps.
"use strict";
const fs = require("fs"), vm = require("vm");
const src = fs.readFileSync(process.argv[2], "utf8");
const scenario = process.argv[3];

// any is a stand-in for whatever the page touches that does not matter
// here (elements, xterm's parts): every property and call is one too.
function any() {
  const f = function () { return p; };
  const p = new Proxy(f, { get: (t, k) => (k === Symbol.toPrimitive ? () => "" : k in t ? t[k] : p), set: (t, k, v) => { t[k] = v; return true; } });
  return p;
}
function storage() {
  const m = new Map();
  return { getItem: (k) => (m.has(k) ? m.get(k) : null), setItem: (k, v) => m.set(k, String(v)), removeItem: (k) => m.delete(k) };
}

// Virtual time: mono is monotonic (performance.now's), the wall clock is
// mono plus where it started plus skew, which a step moves.
let mono = 1000, skew = 0;
const wallStart = Date.UTC(2026, 0, 1);
const wall = () => wallStart + mono + skew;
class WallDate extends Date {
  constructor(...a) { if (a.length) super(...a); else super(wall()); }
  static now() { return wall(); }
}
let timers = [], nextTimer = 1;
function addTimer(fn, ms, every) { const id = nextTimer++; timers.push({ id, at: mono + Math.max(ms || 0, 0), fn, every }); return id; }
function clearTimer(id) { timers = timers.filter((t) => t.id !== id); }
// advance runs the timers due within ms, in order.
function advance(ms) {
  const end = mono + ms;
  for (;;) {
    timers.sort((a, b) => a.at - b.at || a.id - b.id);
    const t = timers[0];
    if (!t || t.at > end) break;
    mono = Math.max(mono, t.at);
    if (t.every) t.at += t.every; else clearTimer(t.id);
    t.fn();
  }
  mono = end;
}

const sockets = [];
class FakeSocket {
  constructor(u) { this.url = u; this.readyState = 0; this.sent = []; sockets.push(this); }
  send(m) { this.sent.push(m); }
  close() { this.closedByPage = true; }
  open() { this.readyState = 1; this.onopen(); }
  drop() { this.readyState = 3; this.onclose({ code: 1006, reason: "" }); }
}
FakeSocket.CONNECTING = 0; FakeSocket.OPEN = 1;
const session = storage();
let status = null;

// load runs the page as a new document: its timeOrigin is the wall clock
// at its start, as a browser's is.
function load() {
  const origin = wall() - mono;
  const statusEl = any();
  const ctx = {
    location: { pathname: "/hosts/h1/terminal", protocol: "http:", host: "gw" },
    document: { getElementById: (id) => (id === "status" ? statusEl : any()), createElement: any, activeElement: null, addEventListener() {} },
    Terminal: class {
      constructor() {
        this.cols = 80; this.rows = 24; this.buffer = { active: { type: "normal" } }; this.textarea = any();
        return new Proxy(this, { get: (t, k) => (k in t ? t[k] : () => any()) });
      }
      write(d, cb) { if (cb) cb(); }
    },
    FitAddon: { FitAddon: class { fit() {} } },
    window: { addEventListener() {}, matchMedia: any }, addEventListener() {}, matchMedia: any, navigator: any(),
    WebSocket: FakeSocket, sessionStorage: session, localStorage: storage(),
    ResizeObserver: class { observe() {} }, TextEncoder, URLSearchParams,
    performance: { timeOrigin: origin, now: () => mono },
    setTimeout: (fn, ms) => addTimer(fn, ms), clearTimeout: clearTimer,
    setInterval: (fn, ms) => addTimer(fn, ms, Math.max(ms, 1)), clearInterval: clearTimer,
    fetch: () => Promise.reject(new TypeError("Failed to fetch")), // the network is down AbortSignal: { timeout: () => undefined },
    Date: WallDate, Math, Number, String, JSON, Uint8Array, Promise, console,
  };
  vm.runInNewContext(src, ctx);
  status = () => String(statusEl.textContent);
}

const seq = (s) => Number(new URL(s.url.replace(/^ws/, "http")).searchParams.get("seq"));
const last = () => sockets[sockets.length - 1];
function fail(why) {
  console.log(why + " (sockets " + sockets.length + ", seqs " + sockets.map(seq).join(", ") + ")");
  process.exit(1);
}

// A page with its terminal, the session told.
load();
last().open();
last().onmessage({ data: JSON.stringify({ type: "session", id: "AAAAAAAAAAAAAAAAAAAAAA", keepMs: 300000 }) });
advance(1000);

// flush lets the page's promises (its check of the login) settle.
const flush = () => new Promise((r) => setImmediate(r));

(async () => {
switch (scenario) {
case "seq":
  // The gateway orders a terminal's attempts by seq and refuses one below
  // the socket it holds (the page's own dead one): each must be above
  // the last, in the page and across a reload of the tab.
  skew -= 3600e3;
  last().drop();
  advance(1000);
  if (sockets.length !== 2 || !last().url.includes("resume=")) fail("the page did not resume");
  if (!(seq(sockets[1]) > seq(sockets[0]))) fail("the resume's seq is not above the page's last");
  skew -= 3600e3;
  load(); // a reload of the tab
  if (!(seq(last()) > seq(sockets[1]))) fail("the reloaded page's seq is not above the tab's last");
  break;
case "lost":
  // Reconnecting, the clock steps forward an hour: the gateway keeps the
  // terminal for keepMs from the drop, not by the page's wall clock.
  last().drop();
  advance(600);
  skew += 3600e3;
  last().drop(); // refused before it opened: the network is still down
  await flush();
  advance(2000);
  if (sockets.length !== 3) fail("the page stopped reconnecting: " + status());
  break;
case "beat":
  // The clock steps back an hour, then the connection dies without a
  // close: the page must still ask after 10 s of quiet and drop it 10 s
  // later, to reconnect.
  skew -= 3600e3;
  advance(30000);
  if (!sockets[0].sent.some((m) => typeof m === "string" && m.includes('"ping"'))) fail("the page never asked whether the gateway is there");
  if (!sockets[0].closedByPage || sockets.length < 2) fail("the page kept a connection that did not answer");
  break;
default:
  fail("no scenario " + scenario);
}
console.log("ok");
})();
