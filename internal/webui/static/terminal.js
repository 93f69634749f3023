"use strict";
// The terminal page speaks one WebSocket to /v1/hosts/{id}/pty: binary
// messages carry terminal bytes both ways; text messages carry JSON control
// messages ({"type":"resize","cols":C,"rows":R}, {"type":"ack","bytes":N}
// and {"type":"ping"} from the page, {"type":"exit","code":N},
// {"type":"error","message":M} and {"type":"pong"} from the gateway).
(function () {
  const m = location.pathname.match(/^\/hosts\/([^/]+)\/terminal$/);
  const hostId = m ? decodeURIComponent(m[1]) : "";
  document.getElementById("host").textContent = hostId;
  const status = document.getElementById("status");

  const term = new Terminal({ cursorBlink: true, convertEol: false, fontSize: 14, scrollback: 5000 });
  const fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(document.getElementById("term"));
  fit.fit();
  window.hostgateTerm = term; // for tests and the console

  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const url = proto + "//" + location.host + "/v1/hosts/" + encodeURIComponent(hostId) + "/pty?ack=1&cols=" + term.cols + "&rows=" + term.rows;
  const ws = new WebSocket(url);
  ws.binaryType = "arraybuffer";
  const enc = new TextEncoder();

  ws.onopen = () => { status.textContent = "connected"; term.focus(); };
  ws.onmessage = (ev) => {
    heard = Date.now();
    if (typeof ev.data === "string") {
      try {
        const msg = JSON.parse(ev.data);
        if (msg.type === "exit") { status.textContent = "exited (" + msg.code + ")"; }
        if (msg.type === "error") { status.textContent = "error: " + msg.message; term.write("\r\n\x1b[31m" + msg.message + "\x1b[0m\r\n"); }
      } catch (e) { /* ignore malformed control */ }
      return;
    }
    // Flow control: tell the gateway what xterm has drawn, so that a
    // flood (yes, a big cat) waits on the host instead of piling up here,
    // and Ctrl-C is seen at once (webterm.AckWindow).
    const data = new Uint8Array(ev.data);
    term.write(data, () => {
      drawn += data.length;
      if (drawn - acked >= ackEvery && ws.readyState === WebSocket.OPEN) {
        acked = drawn;
        ws.send(JSON.stringify({ type: "ack", bytes: drawn }));
      }
    });
  };
  let drawn = 0, acked = 0;
  const ackEvery = 64 << 10;
  ws.onclose = (ev) => { if (!lost) status.textContent = "disconnected" + (ev.reason ? ": " + ev.reason : ""); };

  // A connection that died without a close (the network dropped, the
  // laptop slept) looks open to the page for minutes: the socket's own
  // pings never reach a script. After 10 s without a word from the
  // gateway, ask ({"type":"ping"}, answered {"type":"pong"}); an answer
  // not back 10 s later means the terminal is gone (the gateway ends it
  // too), so say so instead of taking keystrokes nobody reads.
  const quietMs = 10000;
  let heard = Date.now(), asked = 0, lost = false;
  const beat = setInterval(() => {
    if (ws.readyState !== WebSocket.OPEN) { clearInterval(beat); return; }
    const now = Date.now();
    if (asked > heard && now - asked > quietMs) {
      clearInterval(beat);
      lost = true;
      status.textContent = "connection lost: reload the page for a new terminal";
      term.write("\r\n\x1b[31mconnection to the gateway lost\x1b[0m\r\n");
      ws.close();
      return;
    }
    if (now - heard >= quietMs && !(asked > heard)) { asked = now; ws.send(JSON.stringify({ type: "ping" })); }
  }, quietMs / 4);
  ws.onerror = () => { status.textContent = "connection failed"; };

  // The gateway drops a message of over 64 KiB (webterm.MaxMessage), and a
  // paste comes as one onData string of any length: send input in pieces,
  // which the socket delivers in order. A piece may end inside a UTF-8
  // sequence; the shell reads one byte stream.
  const maxPiece = 16 << 10;
  function send(b) {
    if (ws.readyState !== WebSocket.OPEN) return;
    for (let i = 0; i < b.length; i += maxPiece) ws.send(b.subarray(i, i + maxPiece));
  }
  term.onData((d) => send(enc.encode(d)));
  term.onBinary((d) => {
    const b = new Uint8Array(d.length);
    for (let i = 0; i < d.length; i++) b[i] = d.charCodeAt(i) & 0xff;
    send(b);
  });
  function resize() {
    fit.fit();
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "resize", cols: term.cols, rows: term.rows }));
  }
  window.addEventListener("resize", resize);
  term.onResize(() => { if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "resize", cols: term.cols, rows: term.rows })); });
})();
