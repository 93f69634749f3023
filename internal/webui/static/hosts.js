"use strict";
(function () {
  const tbody = document.querySelector("#hosts tbody");
  const errorBox = document.getElementById("error");
  const newSandbox = document.getElementById("new-sandbox");

  // Progress goes to a polite status region, errors to an assertive alert
  // (one assertive region for both interrupted a screen reader with the
  // sandbox's progress, and the list's error replaced it). Each error has
  // an owner, so the list's refresh every 5 s removes only its own: a
  // sandbox's failure stays until the person dismisses it or tries again.
  const progressBox = document.getElementById("progress");
  function progress(text) { progressBox.textContent = text; }
  function alertOf(owner) { return errorBox.querySelector('[data-owner="' + owner + '"]'); }
  function unsay(owner) {
    const old = alertOf(owner);
    if (old) old.remove();
  }
  function sayError(owner, text, dismissable) {
    let p = alertOf(owner);
    if (p && p.firstChild.textContent === text) return; // said already: not again every 5 s
    if (!p) {
      p = document.createElement("p");
      p.dataset.owner = owner;
      p.append(document.createElement("span"));
      errorBox.append(p);
    }
    p.firstChild.textContent = text;
    if (dismissable && !p.querySelector("button")) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "dismiss";
      b.textContent = "Dismiss";
      b.addEventListener("click", () => {
        p.remove();
        // The button went with its message: the keyboard goes back to
        // the one that failed rather than to the page's top.
        if (!newSandbox.hidden) newSandbox.focus();
      });
      p.append(" ", b);
    }
  }

  async function api(path, init) {
    const res = await fetch(path, Object.assign({ credentials: "same-origin", headers: { "Accept": "application/json" } }, init || {}));
    // The login ended under the page (a logout in another tab, expiry): the login page says so.
    if (res.status === 401) { location.href = "/login?error=session_ended&next=" + encodeURIComponent(location.pathname); return null; }
    const body = await res.json().catch(() => ({}));
    if (!res.ok) { throw new Error((body.error && body.error.message) || res.statusText); }
    return body;
  }

  function cell(text, code) {
    const td = document.createElement("td");
    if (code) { const c = document.createElement("code"); c.textContent = text; td.appendChild(c); } else { td.textContent = text; }
    return td;
  }

  // offlineHelp says why host h's terminal is off and what brings it back.
  function offlineHelp(h) {
    if (h.kind === "docker") {
      return "This sandbox's agent is not connected: its terminal opens once it is back; a sandbox that ended is gone for good (start a new one).";
    }
    return "The agent of " + h.id + " is not connected to the gateway: start it on that host (agent connect --gateway " + location.origin +
      " --token TOKEN). This button turns on within 5 s of its connecting.";
  }

  async function load() {
    try {
      const body = await api("/v1/hosts");
      if (!body) return;
      const hosts = body.hosts || body;
      // The rows are rebuilt every 5 s: a keyboard or screen-reader user
      // on a row's button must stay on it, not be thrown back to the page's top.
      const focused = document.activeElement && document.activeElement.closest("#hosts tbody tr");
      const keep = focused ? focused.dataset.host : null;
      tbody.replaceChildren();
      for (const h of hosts) {
        const tr = document.createElement("tr");
        tr.dataset.host = h.id;
        const name = document.createElement("td");
        const dot = document.createElement("span");
        dot.className = "dot" + (h.connected ? " on" : "");
        dot.title = h.connected ? (h.agentVersion ? "connected, agent " + h.agentVersion : "connected") : "offline";
        dot.setAttribute("aria-hidden", "true");
        // The dot's colour alone tells a screen reader nothing.
        const state = document.createElement("span");
        state.className = "sr";
        state.textContent = h.connected ? " (connected)" : " (offline)";
        name.append(dot, document.createTextNode(h.id), state);
        tr.append(name, cell(h.kind || ""), cell((h.info && h.info.os) || ""), cell(h.hostKey || "", true));
        const act = document.createElement("td");
        const a = document.createElement("a");
        a.className = "button terminal-link";
        a.textContent = "Terminal";
        a.setAttribute("aria-label", "Terminal on " + h.id);
        if (h.connected) {
          a.href = "/hosts/" + encodeURIComponent(h.id) + "/terminal";
        } else {
          // An offline host's terminal only fails: the button is off and
          // says how to bring the agent back (it looked like any other, and
          // opened a page that failed). It stays focusable, so a keyboard
          // or screen-reader user hears why; the refresh turns it on.
          a.setAttribute("role", "link");
          a.setAttribute("aria-disabled", "true");
          a.tabIndex = 0;
          a.title = offlineHelp(h);
        }
        act.appendChild(a);
        tr.appendChild(act);
        tbody.appendChild(tr);
        if (h.id === keep) a.focus({ focusVisible: true });
      }
      if (hosts.length === 0) {
        // An empty table said nothing to a first-time user.
        const tr = document.createElement("tr");
        const td = document.createElement("td");
        td.colSpan = 5;
        td.className = "empty";
        const code = (t) => { const c = document.createElement("code"); c.textContent = t; return c; };
        td.append("No hosts yet for this login. A host appears here once its agent connects: an admin makes it a token with ",
          code("gateway token create --role agent --host NAME"), ", and on the host runs ",
          code("agent connect --gateway " + location.origin + " --token TOKEN"), ".");
        tr.appendChild(td);
        tbody.appendChild(tr);
      }
      unsay("list");
    } catch (e) {
      sayError("list", "Could not list hosts: " + e.message);
    }
  }

  // The gateway tells an admin whether Docker is on and which provision body
  // it suggests (image pinned by digest, every resource limit set).
  let sandboxRequest = null;
  async function features() {
    try {
      const me = await api("/v1/me");
      if (me && me.role === "admin" && me.sandboxDefaults) {
        sandboxRequest = me.sandboxDefaults;
        newSandbox.hidden = false;
      }
    } catch (e) { /* no sandbox button */ }
  }

  // Creating a sandbox takes seconds (a minute when its image is pulled):
  // the button said nothing meanwhile, and took a second click.
  const sandboxLabel = newSandbox.textContent;
  newSandbox.addEventListener("click", async () => {
    const focused = document.activeElement === newSandbox;
    newSandbox.disabled = true;
    newSandbox.textContent = "Starting…";
    unsay("sandbox");
    progress("Starting a sandbox: its container is being created (a minute or more when its image is pulled first)…");
    try {
      const ex = await api("/v1/executions", {
        method: "POST",
        headers: { "Content-Type": "application/json", "Accept": "application/json" },
        body: JSON.stringify(sandboxRequest),
      });
      if (ex) {
        progress("Sandbox " + ex.executionId + " started: opening its terminal…");
        location.href = "/hosts/" + encodeURIComponent(ex.executionId) + "/terminal";
        return;
      }
    } catch (e) {
      sayError("sandbox", "Could not start a sandbox: " + e.message, true);
    }
    progress("");
    newSandbox.disabled = false;
    newSandbox.textContent = sandboxLabel;
    // A disabled button drops the keyboard's focus to the page's top.
    if (focused && (document.activeElement === document.body || document.activeElement === null)) newSandbox.focus();
  });

  load();
  features();
  setInterval(load, 5000);
})();
