"use strict";
// The terminal page speaks one WebSocket at a time to /v1/hosts/{id}/pty:
// binary messages carry terminal bytes both ways; text messages carry JSON
// control messages ({"type":"resize","cols":C,"rows":R}, {"type":"ack","bytes":N}
// and {"type":"ping"} from the page, {"type":"session","id":I,"keepMs":K},
// {"type":"skipped","bytes":N}, {"type":"exit","code":N[,"signal":S]},
// {"type":"error","message":M}, {"type":"pong"}, {"type":"inputwait","taken":T},
// {"type":"inputdone","taken":T} and {"type":"starting"}, from the gateway:
// starting says the host has not started the shell yet, every few seconds
// while it has not (the gateway gives up after 30 s and says so); inputwait says
// input waits for the shell, every few seconds while it does, which keeps
// the page's liveness check content while its ping waits behind that
// input, and inputdone that it no longer does; T counts the bytes of the
// socket's input that went on to the shell).
//
// The page asks for a terminal it can resume (?keep=1): when its socket
// drops without the shell ending (the network, a laptop asleep, a reload)
// the shell keeps running on the gateway for keepMs, and the page
// reconnects with ?resume=ID&from=N, N the output bytes it already has;
// the gateway sends what came meanwhile. The id lives in sessionStorage,
// so a reload of this tab gets the same shell back.
(function () {
  const m = location.pathname.match(/^\/hosts\/([^/]+)\/terminal$/);
  const hostId = m ? decodeURIComponent(m[1]) : "";
  document.getElementById("host").textContent = hostId;
  // Every terminal tab was "hostgate · terminal": name the host, so tabs
  // and history tell them apart.
  document.title = hostId + " · hostgate terminal";
  const status = document.getElementById("status");
  const held = document.getElementById("held");
  const keysLine = document.getElementById("keysline");
  const again = document.getElementById("again");
  const relogin = document.getElementById("relogin");

  const term = new Terminal({ cursorBlink: true, convertEol: false, fontSize: 14, scrollback: 5000 });
  const fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(document.getElementById("term"));
  fit.fit();
  window.hostgateTerm = term; // for tests and the console

  // The way out of the terminal for the keyboard (WCAG 2.1.2): Tab,
  // Shift+Tab and Escape are the shell's (completion, readline's Meta),
  // so focus stayed in xterm whatever was pressed. Ctrl+Shift+L goes to
  // the header's last control (Log out), from where Tab comes back by the
  // screen reader toggle and Shift+Tab goes on to the links. The shell
  // loses nothing: xterm
  // sends nothing for Ctrl+Shift+L (a control letter only without Shift),
  // a terminal that sends anything sends Ctrl+L's form feed, which no
  // shell or TUI can tell apart, and Ctrl+L still clears; Chromium keeps
  // no Ctrl+Shift+L of its own. Escape then Tab was tried: the Escape
  // reached the shell and garbled the next key.
  term.attachCustomKeyEventHandler((ev) => {
    if (!(ev.ctrlKey && ev.shiftKey && !ev.altKey && !ev.metaKey && (ev.code === "KeyL" || ev.key === "L" || ev.key === "l"))) return true;
    ev.preventDefault();
    if (ev.type === "keydown") leaveTerminal();
    return false; // keydown, keypress and keyup alike: nothing for the shell
  });
  term.textarea.setAttribute("aria-describedby", "keys readerhint");

  // A screen reader read nothing the shell printed: xterm draws on a
  // canvas and keeps its output out of the accessibility tree unless told
  // (screenReaderMode: rows as a list, new output read out). The toggle
  // over the terminal turns it on, and the browser remembers it.
  //
  // Off by default: on, a flood of output draws 1.6 to 1.9 times slower
  // (2.2 to 2.5 times with the CPU throttled 20x, as on a slow phone;
  // e2e/browser/readercost.mjs, alternating pairs in one page, no screen
  // reader running), a cost to every sighted user for nothing; and no
  // browser tells a page that a screen reader runs (reduced motion,
  // forced colours and more contrast are asked for other needs, and many
  // sighted people use the keyboard alone). So the terminal
  // tells its screen reader users instead: while the mode is off, its
  // input's description, heard on entering it, says so and how to reach
  // the toggle (the toggle alone went unnoticed: the keyboard starts in
  // the terminal).
  const reader = document.getElementById("reader");
  const readerHint = document.getElementById("readerhint");
  const readerKey = "hostgate-terminal-screen-reader";
  function setReader(on) {
    term.options.screenReaderMode = on;
    reader.setAttribute("aria-pressed", String(on));
    readerHint.textContent = on ? "" : "Screen reader mode is off: what the shell prints is not read. Ctrl+Shift+L, then Tab, reaches the Screen reader switch.";
    try { if (on) localStorage.setItem(readerKey, "1"); else localStorage.removeItem(readerKey); } catch (e) { /* storage off: this page only */ }
  }
  let readerOn = false;
  try { readerOn = localStorage.getItem(readerKey) === "1"; } catch (e) { /* storage off */ }
  setReader(readerOn);
  reader.addEventListener("click", () => setReader(reader.getAttribute("aria-pressed") !== "true"));
  function leaveTerminal() {
    const controls = [...document.querySelectorAll("header a[href], header button")].filter((e) =>
      !e.disabled && e.tabIndex >= 0 && e.getClientRects().length > 0);
    if (controls.length) controls[controls.length - 1].focus();
  }

  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const base = proto + "//" + location.host + "/v1/hosts/" + encodeURIComponent(hostId) + "/pty";
  const stored = "hostgate-terminal:" + hostId;
  const enc = new TextEncoder();

  // Close codes (webterm): another page has the terminal; it has ended.
  const TAKEN = 4001, STALE = 4009, GONE = 4004;

  let ws = null;
  let sessionId = sessionStorage.getItem(stored) || "";
  let keepMs = 5 * 60 * 1000; // until the gateway says (a reload resumes before it has)
  let opened = false;
  let received = 0;        // output bytes handed to xterm: where a resume starts
  let drawn = 0, acked = 0; // output bytes xterm has drawn, and acked of them
  let ackTimer = 0;
  // Acks are paced (?ack=2): sent at the latest ackLagMs after xterm has
  // drawn anything, sooner every ackEvery bytes. The gateway sizes what it
  // lets run ahead of the page from how fast they come (a fraction of a
  // second of this page's drawing), so a slow browser's Ctrl-C does not
  // wait behind a megabyte.
  const ackEvery = 64 << 10, ackLagMs = 20;
  let finished = false;    // the terminal ended, or another page has it: no reconnect
  // Spans are timed on performance.now(), not the wall clock, which NTP
  // steps as a laptop wakes: set forward, the page gave up reconnecting to
  // a terminal the gateway kept; set back, it asked no ping for as long.
  let lostAt = 0;          // when the connection was lost, while reconnecting
  let attempt = 0;
  let heard = performance.now(), asked = 0;
  let beat = 0, retry = 0, connectTimer = 0;
  let generation = 0;      // one per terminal this page has opened: late acks of an old one are dropped
  let sent = 0;            // input bytes sent on this socket: inputwait's taken counts from its start
  let heldTimer = 0;

  // Each connect's seq: the gateway lets an attempt take the terminal
  // from the socket it holds (this page's own, dead but not yet found so,
  // or another page's) only if its seq is not lower, and closes a lower
  // one STALE, which ends this page's terminal for good. It was the wall
  // clock, which steps back (NTP setting it on waking from sleep, as a
  // dropped network is resumed): the page's next attempt lost to its own
  // dead socket and said the terminal was open in another page. Monotonic
  // time instead, never below the last seq this tab sent (kept across a
  // reload), so later attempts of a tab always win.
  const seqKey = stored + ":seq";
  const clockOrigin = performance.timeOrigin || Date.now() - performance.now();
  function nextSeq() {
    const last = Number(sessionStorage.getItem(seqKey)) || 0;
    const seq = Math.max(last + 1, Math.floor(clockOrigin + performance.now()));
    sessionStorage.setItem(seqKey, String(seq));
    return seq;
  }

  function connect() {
    const q = new URLSearchParams({ keep: "1", ack: "2", cols: term.cols, rows: term.rows, seq: String(nextSeq()) });
    if (sessionId) { q.set("resume", sessionId); q.set("from", String(received)); }
    const sock = new WebSocket(base + "?" + q.toString());
    const gen = generation;
    sent = 0;
    showHeld(null);
    let sockOpened = false;
    ws = sock;
    sock.binaryType = "arraybuffer";
    // A connect that hangs (the gateway unreachable) is given up and
    // tried again rather than waited on.
    connectTimer = setTimeout(() => { if (sock.readyState === WebSocket.CONNECTING) sock.close(); }, 10000);
    sock.onopen = () => {
      clearTimeout(connectTimer);
      opened = true;
      sockOpened = true;
      lostAt = 0;
      attempt = 0;
      heard = performance.now(); asked = 0;
      status.textContent = "connected";
      term.focus();
      startBeat(sock);
    };
    sock.onmessage = (ev) => {
      if (sock !== ws) return;
      heard = performance.now();
      if (typeof ev.data === "string") { control(ev.data); return; }
      // Flow control: tell the gateway what xterm has drawn, so that a
      // flood (yes, a big cat) waits on the host instead of piling up here,
      // and Ctrl-C is seen at once (webterm.AckWindow).
      const data = new Uint8Array(ev.data);
      received += data.length;
      term.write(data, () => {
        if (gen !== generation) return;
        drawn += data.length;
        if (drawn - acked >= ackEvery) sendAck();
        else if (!ackTimer) ackTimer = setTimeout(sendAck, ackLagMs);
      });
    };
    sock.onclose = (ev) => {
      clearTimeout(connectTimer);
      if (sock !== ws) return;
      ws = null;
      showHeld(null);
      clearInterval(beat);
      closed(ev, sockOpened);
    };
  }

  function sendAck() {
    clearTimeout(ackTimer);
    ackTimer = 0;
    if (drawn > acked && ws && ws.readyState === WebSocket.OPEN) {
      acked = drawn;
      ws.send(JSON.stringify({ type: "ack", bytes: drawn }));
    }
  }

  function control(text) {
    let msg;
    try { msg = JSON.parse(text); } catch (e) { return; /* ignore malformed control */ }
    switch (msg.type) {
      case "starting":
        status.textContent = "connected: waiting for the host to start the shell…";
        break;
      case "session":
        sessionId = msg.id; keepMs = msg.keepMs || keepMs;
        sessionStorage.setItem(stored, sessionId);
        if (status.textContent.startsWith("connected: waiting")) status.textContent = "connected";
        break;
      case "skipped":
        received += msg.bytes; drawn += msg.bytes;
        term.write("\r\n\x1b[33m[" + msg.bytes + " bytes of output were lost while disconnected]\x1b[0m\r\n");
        break;
      case "exit":
        // A shell a signal ended (a kill -9, a sandbox's memory limit)
        // said "exited (-1)".
        finish(msg.signal ? "killed by signal " + msg.signal + (msg.signal === "KILL" ? " (kill -9, or out of memory)" : "") : "exited (" + msg.code + ")");
        break;
      case "inputwait":
        showHeld(msg.taken);
        break;
      case "inputdone":
        showHeld(null);
        break;
      case "error":
        status.textContent = "error: " + msg.message;
        term.write("\r\n\x1b[31m" + msg.message + "\x1b[0m\r\n");
        break;
    }
  }

  // showHeld says, politely, that input waits for the shell (a paste into
  // a program that does not read it, a host that is slow): the terminal
  // looked frozen, with nothing to say why. taken is the gateway's count
  // of this socket's input gone on to the shell, undefined from a gateway
  // that does not count; null clears the note. A gateway that sends no
  // inputdone stops its notes (every 4 s at most) when the input has gone:
  // the note clears 10 s after the last.
  //
  // The note shows in the line over the terminal, in place of the keys'
  // hint, and on a phone in a short form ("input waits: 3.2 MiB"): the
  // long one (kept for screen readers) wrapped the header.
  function showHeld(taken) {
    clearTimeout(heldTimer);
    heldTimer = 0;
    let text = "", short = "";
    if (taken !== null) {
      text = "the host is not reading input yet";
      short = "input waits";
      if (typeof taken === "number") {
        const waiting = size(Math.max(sent - taken, 0));
        text += "; " + waiting + " waiting";
        short += ": " + waiting;
      }
      heldTimer = setTimeout(() => showHeld(null), 10000);
    }
    // Only a change is written: a screen reader reads each write.
    const long = held.querySelector(".long");
    if ((long ? long.textContent : "") === text) return;
    keysLine.classList.toggle("held", text !== "");
    if (!text) { held.replaceChildren(); return; }
    const l = document.createElement("span"), s = document.createElement("span");
    l.className = "long"; l.textContent = text;
    s.className = "short"; s.textContent = short; s.setAttribute("aria-hidden", "true");
    held.replaceChildren(l, s);
  }
  function size(n) {
    if (n < 1 << 20) return Math.ceil(n / 1024) + " KiB";
    return (n / (1 << 20)).toFixed(1) + " MiB";
  }

  // finish ends the page's terminal for good, and offers what comes next:
  // a new terminal, or the login page when the login has ended. The page
  // said "exited", or the gateway's "shutting down", and stayed so; after
  // a gateway restart only a reload went on. offer is false when another
  // page has the terminal: a new one here would take it from that page.
  function finish(text, offer = true) {
    finished = true;
    showHeld(null);
    sessionStorage.removeItem(stored);
    if (text) status.textContent = text;
    if (offer) offerNext();
  }

  // loginEnded asks the gateway whether this page's login still holds: a
  // WebSocket refused 401 looks like any failed connection to a script.
  async function loginEnded() {
    try {
      // A gateway that does not answer is asked again at the next attempt.
      const res = await fetch("/v1/me", { credentials: "same-origin", cache: "no-store", headers: { "Accept": "application/json" }, signal: AbortSignal.timeout(10000) });
      return res.status === 401;
    } catch (e) {
      return false; // the gateway is not reachable: not known
    }
  }

  async function offerNext() {
    const ended = await loginEnded();
    if (!finished) return;
    if (ended) { endLogin(); return; }
    show(again);
  }

  // endLogin: the login ended (logged out elsewhere, revoked, expired),
  // and with it the terminal: the page tried to reconnect for minutes.
  function endLogin() {
    finish("your login ended (logged out, revoked or expired): log in again for a new terminal", false);
    relogin.href = "/login?error=session_ended&next=" + encodeURIComponent(location.pathname);
    show(relogin);
  }

  // show puts el in the header, and the keyboard on it if it was in the
  // terminal, which takes no more input.
  function show(el) {
    const typing = document.getElementById("term").contains(document.activeElement);
    el.hidden = false;
    if (typing) el.focus();
  }

  // Another terminal on the same host, in this page: the old one's output
  // stays above it.
  again.addEventListener("click", () => {
    again.hidden = true;
    generation++;
    if (ws) { const old = ws; ws = null; old.onclose = null; old.close(); }
    clearTimeout(ackTimer); clearTimeout(retry);
    ackTimer = 0;
    finished = false; opened = false; sessionId = "";
    received = 0; drawn = 0; acked = 0; lostAt = 0; attempt = 0;
    status.textContent = "connecting…";
    // Out of the modes and the full-screen program's screen the old one
    // left (1049l only there: elsewhere it moves the cursor back).
    term.write((term.buffer.active.type === "alternate" ? "\x1b[?1049l" : "") + "\x1b[!p\r\n\x1b[2m--- new terminal ---\x1b[0m\r\n");
    term.focus();
    connect();
  });

  function closed(ev, sockOpened) {
    if (finished) return;
    if (!opened && !sessionId) {
      finish("connection failed" + (ev.reason ? ": " + ev.reason : ""));
      return;
    }
    if (ev.code === TAKEN || ev.code === STALE) {
      finish("this terminal is open in another page", false);
      return;
    }
    if (ev.code === GONE) {
      // Our stored terminal ended while we were away: after a reload,
      // start a new one; otherwise say so.
      const reloaded = received === 0;
      sessionId = ""; sessionStorage.removeItem(stored);
      if (reloaded) { connect(); return; }
      // The gateway says why when it closed the terminal itself (this
      // page away past its keep time, or too many terminals kept): else
      // it read as the shell's own exit.
      const why = ev.reason && !ev.reason.startsWith("this terminal has ended") ? ": " + ev.reason : "";
      finish("the terminal ended while disconnected" + why);
      term.write("\r\n\x1b[31mthe terminal ended while disconnected" + why + "\x1b[0m\r\n");
      return;
    }
    if (ev.code === 1000 || !sessionId) {
      // The gateway ended it and said why (an error message came first).
      if (!status.textContent.startsWith("error")) finish("disconnected" + (ev.reason ? ": " + ev.reason : ""));
      else finish("");
      return;
    }
    if (!sockOpened) {
      // Refused before it opened: a login that ended meanwhile is refused
      // for good, and the terminal went with it.
      loginEnded().then((ended) => {
        if (finished || ws) return;
        if (ended) endLogin(); else reconnect();
      });
      return;
    }
    reconnect();
  }

  // reconnect tries again, sooner at first, for as long as the gateway
  // keeps the terminal.
  function reconnect() {
    if (!lostAt) {
      lostAt = performance.now();
      term.write("\r\n\x1b[33mconnection to the gateway lost, reconnecting…\x1b[0m\r\n");
    }
    if (performance.now() - lostAt > keepMs) {
      finish("connection lost: the gateway kept the terminal no longer");
      return;
    }
    status.textContent = "connection lost: reconnecting…";
    const delay = Math.min(500 * Math.pow(2, attempt++), 5000);
    clearTimeout(retry);
    retry = setTimeout(connect, delay);
  }

  // A connection that died without a close (the network dropped, the
  // laptop slept) looks open to the page for minutes: the socket's own
  // pings never reach a script. After 10 s without a word from the
  // gateway, ask ({"type":"ping"}, answered {"type":"pong"}); an answer
  // not back 10 s later means the connection is gone: drop it and
  // reconnect instead of taking keystrokes nobody reads.
  const quietMs = 10000;
  function startBeat(sock) {
    clearInterval(beat);
    beat = setInterval(() => {
      if (sock !== ws || sock.readyState !== WebSocket.OPEN) { clearInterval(beat); return; }
      const now = performance.now();
      if (asked > heard && now - asked > quietMs) {
        clearInterval(beat);
        ws = null;
        sock.onclose = null;
        sock.close();
        if (sessionId) { reconnect(); return; }
        finish("connection lost");
        term.write("\r\n\x1b[31mconnection to the gateway lost\x1b[0m\r\n");
        return;
      }
      if (now - heard >= quietMs && !(asked > heard)) { asked = now; sock.send(JSON.stringify({ type: "ping" })); }
    }, quietMs / 4);
  }

  // The gateway drops a message of over 64 KiB (webterm.MaxMessage), and a
  // paste comes as one onData string of any length: send input in pieces,
  // which the socket delivers in order. A piece may end inside a UTF-8
  // sequence; the shell reads one byte stream. Input typed while the
  // connection is down goes nowhere, and the status says so.
  const maxPiece = 16 << 10;
  function send(b) {
    if (!ws || ws.readyState !== WebSocket.OPEN) return;
    for (let i = 0; i < b.length; i += maxPiece) ws.send(b.subarray(i, i + maxPiece));
    sent += b.length;
  }
  term.onData((d) => send(enc.encode(d)));
  term.onBinary((d) => {
    const b = new Uint8Array(d.length);
    for (let i = 0; i < d.length; i++) b[i] = d.charCodeAt(i) & 0xff;
    send(b);
  });
  function sendSize() {
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "resize", cols: term.cols, rows: term.rows }));
  }
  // The terminal fits its box whenever the box changes, not only the
  // window: a header that grows (a note that input waits, a long status,
  // on a phone two more lines) left xterm its rows, the last ones (the
  // cursor's) below the screen.
  new ResizeObserver(() => fit.fit()).observe(document.getElementById("term"));
  term.onResize(sendSize);

  connect();
})();
