// The keyboard alone leaves the terminal, and the shell loses nothing to
// it: Tab, Shift+Tab and Escape are the shell's, so focus stayed in xterm
// whatever was pressed and the header's links and Log out were out of
// reach (WCAG 2.1.2). Ctrl+Shift+L leaves to Log out, with its focus
// ring, and sends the shell nothing: `cat -A` shows what the shell gets.
// Tab from Log out comes back in; a Tab in the terminal still reaches the
// shell as \t and completes. The page shows the keys beside the terminal
// and tells a screen reader (aria-describedby on xterm's textarea).
import { run, login, screenshot, env, screenShows } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");
const dir = env("HOSTGATE_DIR"); // holds tab-completion-target, reading "completed-by-tab"

// shows waits for text on the terminal's screen, and says what it shows if
// it never comes.
async function shows(page, text) {
  try {
    await screenShows(page, text, 20000);
  } catch (e) {
    const screen = await page.evaluate(() => {
      const buf = window.hostgateTerm.buffer.active, out = [];
      for (let i = 0; i < buf.length; i++) out.push(buf.getLine(i).translateToString(true));
      return out.join("\n").trim();
    });
    throw new Error("the terminal does not show " + JSON.stringify(text) + ":\n" + screen);
  }
}

await run(async (browser) => {
  const page = await browser.newPage({ viewport: { width: 1100, height: 700 } });
  await login(page, gateway, token, "/hosts/local/terminal");
  await page.waitForFunction(() => document.getElementById("status").textContent === "connected", null, { timeout: 20000 });
  const where = () => page.evaluate(() => {
    const e = document.activeElement;
    return { inTerm: document.getElementById("term").contains(e), tag: e.tagName, text: e.textContent.trim(), visible: e.matches(":focus-visible"), ring: getComputedStyle(e).outlineStyle };
  });
  // What the page tells a screen reader in the terminal, and shows.
  const hint = await page.evaluate(() => {
    // The first of what describes it (the keys line, then what else).
    const t = document.querySelector("#term textarea"), ids = t && (t.getAttribute("aria-describedby") || "").split(/\s+/), d = ids && ids[0] && document.getElementById(ids[0]);
    return d && { text: d.textContent.trim(), shown: d.getClientRects().length > 0 && d.getBoundingClientRect().width > 1 && getComputedStyle(d).visibility === "visible" };
  });
  console.log("the terminal's description: " + JSON.stringify(hint));
  if (!hint || !/Ctrl\+Shift\+L/.test(hint.text) || !hint.shown) throw new Error("the terminal's textarea is described by " + JSON.stringify(hint) + ", want a shown text naming Ctrl+Shift+L");
  // The shell's line editor is up before a Tab is pressed (typed ahead of
  // it, the Tab is the tty's).
  // bash, whose readline completes on Tab (the login shell may be dash).
  await page.keyboard.type("exec bash --norc --noprofile\n");
  await page.keyboard.type("echo ready-$((2*3))\n");
  await shows(page, "ready-6");
  // A Tab is the shell's: it completes a file name.
  await page.keyboard.type("cat " + dir + "/tab-comp");
  await page.keyboard.press("Tab");
  await page.keyboard.type("\n");
  await shows(page, "completed-by-tab");
  let at = await where();
  if (!at.inTerm) throw new Error("a Tab left the terminal: " + JSON.stringify(at));
  // cat -A shows every byte the shell's side gets: a Tab comes as ^I.
  await page.keyboard.type("cat -A\n");
  await new Promise((r) => setTimeout(r, 300));
  await page.keyboard.type("a");
  await page.keyboard.press("Tab");
  await page.keyboard.type("b\n");
  await shows(page, "a^Ib$");
  // The chord leaves to Log out, with its ring.
  await page.keyboard.press("Control+Shift+L");
  at = await where();
  console.log("Ctrl+Shift+L: " + JSON.stringify(at));
  if (at.inTerm || at.text !== "Log out" || !at.visible || at.ring === "none") throw new Error("Ctrl+Shift+L in the terminal: the focus is on " + JSON.stringify(at) + ", want Log out with its ring");
  await screenshot(page, "left-terminal");
  // Tab comes back (by the screen reader toggle), and the next line
  // reaches cat as typed: the chord sent nothing (a Ctrl+L would show as ^L).
  await page.keyboard.press("Tab");
  await page.keyboard.press("Tab");
  at = await where();
  if (!at.inTerm) throw new Error("Tab, Tab from Log out: the focus is on " + JSON.stringify(at) + ", want the terminal");
  await page.keyboard.type("mark-57\n");
  await shows(page, "mark-57$");
  const lines = await page.evaluate(() => {
    const buf = window.hostgateTerm.buffer.active, out = [];
    for (let i = 0; i < buf.length; i++) { const l = buf.getLine(i).translateToString(true).trim(); if (l) out.push(l); }
    return out;
  });
  if (!lines.includes("mark-57$") || lines.some((l) => l.includes("^L") || l.includes("^["))) throw new Error("cat got more than was typed after Ctrl+Shift+L:\n" + lines.join("\n"));
  await page.keyboard.press("Control+D");
  await page.keyboard.type("echo back-$((7*8))\n");
  await shows(page, "back-56");
  // A smaller window gives the shell a smaller terminal (the page fits
  // xterm to its box, which the window sizes).
  const was = await page.evaluate(() => window.hostgateTerm.rows);
  await page.setViewportSize({ width: 640, height: 400 });
  await page.waitForFunction((was) => window.hostgateTerm.rows < was, was, { timeout: 5000 });
  const size = await page.evaluate(() => window.hostgateTerm.rows + " " + window.hostgateTerm.cols);
  await page.keyboard.type("stty size\n");
  await shows(page, size);
});
