// Renders message.js's text; a new message.js is taken in place (HMR), so
// a full reload shows as a lost window.loadedAt.
import { message } from "./message.js";

function render(text) {
  document.getElementById("message").textContent = text;
}

window.loadedAt ??= Date.now();
render(message);

if (import.meta.hot) {
  import.meta.hot.accept("./message.js", (m) => {
    if (m) render(m.message);
  });
}
