// Pastes HOSTGATE_PASTE_FROM (megabytes) into a terminal whose shell is
// busy for HOSTGATE_BUSY_S seconds before `cat > HOSTGATE_PASTE_TO` reads
// it: the gateway stops reading the page once it holds 256 KiB for the
// shell, and the page's pings wait behind the paste. The page must stay
// connected throughout, and the Go test compares what cat wrote: the page
// took the silence for a lost connection after 20 s and dropped the
// socket, and with it the rest of the paste. Meanwhile the page says, in
// a polite status, that the host is not reading input and how much waits,
// and stops saying so once cat has it: it said nothing, and the terminal
// looked frozen. On a phone (360 px) the note takes no rows from the
// terminal: in the header it wrapped it to three lines, and the terminal
// lost five rows. It shows short there, in place of the keys' hint, and a
// screen reader hears it whole. Whatever else changes the terminal's box,
// the terminal fits it: xterm kept its rows, and the bottom ones (the
// cursor's) went off the screen.
import { readFileSync, statSync, existsSync } from "node:fs";
import { run, login, screenshot, env, screenShows as shows } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");
const text = readFileSync(env("HOSTGATE_PASTE_FROM"), "utf8");
const to = env("HOSTGATE_PASTE_TO");
const busy = Number(env("HOSTGATE_BUSY_S"));

await run(async (browser) => {
  const page = await browser.newPage({ viewport: { width: 360, height: 740 } });
  await login(page, gateway, token, "/hosts/local/terminal");
  await page.waitForFunction(() => document.getElementById("status").textContent === "connected", null, { timeout: 20000 });
  // Every status the page shows from here on.
  await page.evaluate(() => {
    window.statuses = [];
    new MutationObserver(() => window.statuses.push(document.getElementById("status").textContent))
      .observe(document.getElementById("status"), { childList: true, characterData: true, subtree: true });
    const held = document.getElementById("held");
    window.helds = [];
    // What a screen reader reads of the note: its text but the aria-hidden.
    window.spoken = (el) => [...el.childNodes].map((n) => n.nodeType === Node.TEXT_NODE ? n.textContent : n.nodeType === Node.ELEMENT_NODE && n.getAttribute("aria-hidden") !== "true" ? window.spoken(n) : "").join("");
    if (held) new MutationObserver(() => window.helds.push({ at: Date.now(), text: window.spoken(held), role: held.getAttribute("role"), shown: held.getClientRects().length > 0 }))
      .observe(held, { childList: true, characterData: true, subtree: true });
  });
  // Not echoed: what is measured is the input's way, not xterm drawing 4 MiB.
  await page.keyboard.type("stty -echo; sleep " + busy + "; cat > " + to + "; stty echo; echo pasted-$((6*7))\n");
  await new Promise((r) => setTimeout(r, 300));
  const t0 = Date.now();
  await page.evaluate((s) => window.hostgateTerm.paste(s), text);
  const want = Buffer.byteLength(text);
  // Where the terminal ends, and the page (its box, xterm's rows, the page's height).
  const geometry = () => page.evaluate(() => ({
    header: Math.round(document.querySelector("header").getBoundingClientRect().height),
    term: Math.round(document.getElementById("term").getBoundingClientRect().bottom),
    rows: Math.round(document.querySelector("#term .xterm-screen").getBoundingClientRect().bottom),
    page: document.scrollingElement.scrollHeight, window: innerHeight, size: window.hostgateTerm.rows + " " + window.hostgateTerm.cols,
    keys: Math.round(document.querySelector("div.keys").getBoundingClientRect().height),
    // The note's parts a sighted person sees: laid out, wider than a
    // clipped 1 px, inside the window, and not cut short by an ellipsis.
    seen: [...document.querySelectorAll("#held, #held *")].filter((e) => e.children.length === 0 && e.textContent && e.getClientRects().length && e.getBoundingClientRect().width > 2 &&
      getComputedStyle(e).clipPath === "none" && e.getBoundingClientRect().right <= innerWidth && e.scrollWidth <= e.clientWidth + 1 &&
      (e === document.getElementById("held") || document.getElementById("held").scrollWidth <= document.getElementById("held").clientWidth + 1)).map((e) => e.textContent),
  }));
  const cdp = await page.context().newCDPSession(page);
  // How Chromium's accessibility tree has the note: its role, its live
  // politeness and the text it reads.
  const announced = async () => {
    const { root } = await cdp.send("DOM.getDocument");
    const { nodeId } = await cdp.send("DOM.querySelector", { nodeId: root.nodeId, selector: "#held" });
    const { nodes } = await cdp.send("Accessibility.getPartialAXTree", { nodeId, fetchRelatives: false });
    const n = nodes[0];
    const live = (n.properties || []).find((p) => p.name === "live");
    return { role: n.role && n.role.value, live: live && live.value.value, text: await page.locator("#held").ariaSnapshot() };
  };
  const before = await geometry();
  let during = null;
  try {
    // The gateway says so within its 4 s tick; 20 s leaves room for a
    // loaded machine (11 s at load 11 on 2 cores, a CI suite beside a
    // helper's sandboxes).
    await page.waitForFunction(() => window.spoken(document.getElementById("held")) !== "", null, { timeout: 20000 });
    await new Promise((r) => setTimeout(r, 300)); // a frame for the layout and the fit
    during = await geometry();
    during.announced = await announced();
    await screenshot(page, "input-held");
    // A wider window shows the whole note.
    await page.setViewportSize({ width: 1100, height: 740 });
    await new Promise((r) => setTimeout(r, 300));
    during.wide = (await geometry()).seen;
    await page.setViewportSize({ width: 360, height: 740 });
    await new Promise((r) => setTimeout(r, 300));
  } catch (e) { /* said below */ }
  for (const end = Date.now() + (busy + 30) * 1000; !(existsSync(to) && statSync(to).size >= want);) {
    if (Date.now() > end) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  const took = Date.now() - t0;
  const got = existsSync(to) ? statSync(to).size : 0;
  // What the page said while the paste waited: the note came within
  // seconds of the paste and said how much waited; it goes once cat has
  // read it all (the gateway's inputdone; without it, 10 s after the
  // gateway's last inputwait).
  let cleared = true;
  try {
    await page.waitForFunction(() => window.spoken(document.getElementById("held")) === "", null, { timeout: 3000 });
  } catch (e) {
    cleared = false;
  }
  const helds = await page.evaluate(() => window.helds);
  console.log("the input note, ms after the paste: " + JSON.stringify(helds.map((h) => [h.at - t0, h.text])));
  const first = helds.find((h) => h.text !== "");
  if (!first || !/^the host is not reading input yet; \d+(\.\d)? (KiB|MiB) waiting$/.test(first.text) || first.role !== "status" || !first.shown || first.at - t0 > 20000) {
    throw new Error("while 4 MiB waited for a shell in sleep the page said " + JSON.stringify(helds) + "; want, within 20 s, a shown role=status saying the host is not reading input and how much waits");
  }
  if (!cleared) throw new Error("cat has the paste, and 3 s later the page still says " + JSON.stringify(await page.evaluate(() => window.spoken(document.getElementById("held")))));
  console.log("geometry before the note " + JSON.stringify(before) + ", with it " + JSON.stringify(during));
  if (during.rows > during.term || during.term > during.window || during.page > during.window) {
    throw new Error("with the note the terminal's rows end at " + during.rows + " px, its box at " + during.term + ", the page at " + during.page + ", in a window of " + during.window + ": its last rows are off the screen");
  }
  // On a phone the note takes no rows from the terminal: the header and
  // the line over the terminal keep their heights, and xterm its rows (the
  // note in the header made it three lines, 50 -> 127 px, 41 -> 36 rows).
  if (during.header !== before.header || during.keys !== before.keys || during.size !== before.size) {
    throw new Error("at 360 px the note changes the header from " + before.header + " to " + during.header + " px, the line over the terminal from " + before.keys + " to " + during.keys + " px, the terminal from " + before.size + " to " + during.size + " (rows cols)");
  }
  // It is seen, with its amount, and announced whole, politely.
  if (!during.seen.some((t) => /^input waits: \d+(\.\d)? (KiB|MiB)$/.test(t))) throw new Error("at 360 px the note shows " + JSON.stringify(during.seen) + "; want \"input waits: N MiB\" whole on the screen");
  const a = during.announced;
  if (a.role !== "status" || a.live !== "polite" || !/^- status: the host is not reading input yet; \d+(\.\d)? (KiB|MiB) waiting$/.test(a.text)) {
    throw new Error("a screen reader has the note as " + JSON.stringify(a) + "; want a polite status reading the whole note");
  }
  if (!during.wide.some((t) => /^the host is not reading input yet; \d+(\.\d)? (KiB|MiB) waiting$/.test(t))) throw new Error("at 1100 px the note shows " + JSON.stringify(during.wide) + "; want it whole");
  await page.keyboard.press("Control+D");
  const statuses = await page.evaluate(() => window.statuses);
  console.log("pasted " + want + " bytes into a shell busy for " + busy + " s: cat had " + got + " after " + took + " ms; statuses " + JSON.stringify(statuses));
  if (statuses.some((s) => s !== "connected")) throw new Error("while the paste waited for the shell the page showed " + JSON.stringify(statuses) + "; cat has " + got + " of " + want + " bytes");
  await shows(page, "pasted-42");
  // The shell has the terminal's size once the note has gone.
  const after = await geometry();
  if (after.rows > after.term || after.page > after.window) throw new Error("after the note the terminal does not fit: " + JSON.stringify(after));
  await page.keyboard.type("stty size\n");
  await shows(page, after.size);
  await screenshot(page, "pastebusy");
});
