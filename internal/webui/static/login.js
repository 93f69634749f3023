"use strict";
(function () {
  // The username a password manager files the token under: this
  // gateway's address, which the person knows it by.
  document.getElementById("gateway").value = location.host;
  const params = new URLSearchParams(location.search);
  const next = params.get("next");
  // Only same-origin paths: an open redirect would let a link log someone in and send them anywhere.
  if (next && next.startsWith("/") && !next.startsWith("//")) {
    document.getElementById("next").value = next;
  }
  // The server names an error by code: text taken from the URL would let
  // any link put words of its choosing on the gateway's login page.
  const messages = {
    invalid_token: "That token is not valid: it is mistyped, revoked or an agent's. gateway dev prints a new admin token at each start and ends the one before; an admin makes others with gateway token create.",
    expired_token: "That token has expired: an admin makes a new one with gateway token create.",
    session_token: "That is a login session's key, not a token: log in with the token itself.",
    session_ended: "Your login ended (logged out in another tab, expired or revoked; gateway dev ends it at each start): log in again.",
    host_forbidden: "You are logged in, with a token that does not reach the host of the page you opened. Log in with a token for that host: an admin makes one with gateway token create --role client --host ID.",
    rate_limited: "Too many failed logins from this address: every login from it, a right token too, is refused for up to a minute. Wait, then try again.",
    two_sessions: "This browser sends the gateway two different login cookies: a page under a parent domain (such as a preview) set one. Clear this site's cookies in the browser's settings, then log in again; logging in alone leaves the other cookie in place.",
    agent_login: "The login this browser holds is an agent's token, which cannot use the web UI: log in with a client or admin token.",
    unavailable: "The gateway cannot check logins right now (its state store is not answering), so it could not tell whether yours still holds: it may well. Try again in a moment; if this lasts, the gateway's log says why.",
  };
  // How long the rate limit holds, when the gateway said: a number only,
  // so a link can put no words of its own here either.
  const retry = params.get("retry");
  if (retry && /^[0-9]{1,5}$/.test(retry)) {
    const n = Number(retry);
    messages.rate_limited = "Too many failed logins from this address (a script there with a wrong token counts too): every login from it, a right token too, is refused for " +
      (n === 1 ? "1 more second" : n + " more seconds") + ". Wait, then try again.";
  }
  const code = params.get("error");
  if (code && Object.hasOwn(messages, code)) {
    document.getElementById("error").textContent = messages[code];
    // The token typed was refused: the field says so (the message
    // describes it), not only the red text under the button.
    if (code.endsWith("_token")) document.getElementById("token").setAttribute("aria-invalid", "true");
  }
})();
