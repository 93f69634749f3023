// Pastes HOSTGATE_PASTE_FROM (megabytes) into a terminal whose shell is
// busy for HOSTGATE_BUSY_S seconds before `cat > HOSTGATE_PASTE_TO` reads
// it: the gateway stops reading the page once it holds 256 KiB for the
// shell, and the page's pings wait behind the paste. The page must stay
// connected throughout, and the Go test compares what cat wrote: the page
// took the silence for a lost connection after 20 s and dropped the
// socket, and with it the rest of the paste. Meanwhile the page says, in
// a polite status, that the host is not reading input and how much waits,
// and stops saying so once cat has it: it said nothing, and the terminal
// looked frozen. On a phone (360 px) the note wraps the header; the
// terminal fits what is left: xterm kept its rows, and the bottom ones
// (the cursor's) went off the screen.
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
    if (held) new MutationObserver(() => window.helds.push({ at: Date.now(), text: held.textContent, role: held.getAttribute("role"), shown: held.getClientRects().length > 0 }))
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
  }));
  const before = await geometry();
  let during = null;
  try {
    await page.waitForFunction(() => document.getElementById("held").textContent !== "", null, { timeout: 10000 });
    await new Promise((r) => setTimeout(r, 300)); // a frame for the layout and the fit
    during = await geometry();
    await screenshot(page, "input-held");
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
    await page.waitForFunction(() => document.getElementById("held").textContent === "", null, { timeout: 3000 });
  } catch (e) {
    cleared = false;
  }
  const helds = await page.evaluate(() => window.helds);
  console.log("the input note, ms after the paste: " + JSON.stringify(helds.map((h) => [h.at - t0, h.text])));
  const first = helds.find((h) => h.text !== "");
  if (!first || !/^the host is not reading input yet; \d+(\.\d)? (KiB|MiB) waiting$/.test(first.text) || first.role !== "status" || !first.shown || first.at - t0 > 10000) {
    throw new Error("while 4 MiB waited for a shell in sleep the page said " + JSON.stringify(helds) + "; want, within 10 s, a shown role=status saying the host is not reading input and how much waits");
  }
  if (!cleared) throw new Error("cat has the paste, and 3 s later the page still says " + JSON.stringify(await page.textContent("#held")));
  console.log("geometry before the note " + JSON.stringify(before) + ", with it " + JSON.stringify(during));
  if (during.rows > during.term || during.term > during.window || during.page > during.window) {
    throw new Error("with the note the terminal's rows end at " + during.rows + " px, its box at " + during.term + ", the page at " + during.page + ", in a window of " + during.window + ": its last rows are off the screen");
  }
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
