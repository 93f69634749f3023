"use strict";
(function () {
  const params = new URLSearchParams(location.search);
  const next = params.get("next");
  // Only same-origin paths: an open redirect would let a link log someone in and send them anywhere.
  if (next && next.startsWith("/") && !next.startsWith("//")) {
    document.getElementById("next").value = next;
  }
  if (params.get("error")) {
    document.getElementById("error").textContent = params.get("error");
  }
})();
