// The gateway restarts under an open terminal page (its terminals end with
// it). The page says so and offers a new terminal, which the keyboard is
// on: it said "terminal closed: the gateway is shutting down" and stayed
// so, the gateway back, until the person thought of reloading. The new
// terminal opens in the page, below the old one's output, and is a new
// shell. A shell that exits, or that a signal ends, is offered a new one
// too, and the page says which.
import { existsSync } from "node:fs";
import { run, login, screenshot, env, screenShows } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");
const host = env("HOSTGATE_HOST");

// shows waits for text on the screen, and on failure says what is there.
async function shows(page, text) {
  try {
    await screenShows(page, text, 20000);
  } catch (e) {
    const screen = await page.evaluate(() => {
      const b = window.hostgateTerm.buffer.active, o = [];
      for (let i = 0; i < b.length; i++) { const l = b.getLine(i).translateToString(true); if (l) o.push(l); }
      return o.join("\n");
    });
    throw new Error("the terminal does not show " + JSON.stringify(text) + " (status " + await page.textContent("#status") + "):\n" + screen);
  }
}

const connected = (page) => page.waitForFunction(() => document.getElementById("status").textContent === "connected", null, { timeout: 60000 });

await run(async (browser) => {
  const page = await browser.newPage({ viewport: { width: 1100, height: 700 } });
  const problems = [];
  page.on("pageerror", (e) => problems.push("uncaught: " + e.message));
  await login(page, gateway, token, "/hosts/" + encodeURIComponent(host) + "/terminal");
  await connected(page);
  await page.keyboard.type("HG_MARK=old$((6*7)); echo before-$((6*7))\n");
  await shows(page, "before-42");

  console.log("hostgate-step: restart gateway");
  const t0 = Date.now();
  let seen;
  try {
    await page.waitForFunction(() => { const a = document.getElementById("again"); return a && !a.hidden; }, null, { timeout: 30000 });
  } catch (e) {
    // Below: what the page shows instead.
  } finally {
    seen = await page.evaluate(() => {
      const a = document.getElementById("again");
      return { status: document.getElementById("status").textContent, again: !!a && !a.hidden && a.textContent, focused: !!a && document.activeElement === a };
    });
    console.log("after the restart, " + (Date.now() - t0) + " ms: " + JSON.stringify(seen));
  }
  if (!/shutting down/.test(seen.status) || seen.again !== "New terminal" || !seen.focused) {
    throw new Error("after the gateway's restart the page shows " + JSON.stringify(seen) + ": want it said, and New terminal offered with the keyboard on it");
  }
  await screenshot(page, "restarted");
  // The gateway back (the test says so), and the host's agent with it.
  for (const end = Date.now() + 60000; !existsSync(env("HOSTGATE_STEP_DONE"));) {
    if (Date.now() > end) throw new Error("the gateway did not come back within 60 s");
    await new Promise((r) => setTimeout(r, 100));
  }
  // The keyboard that was in the terminal opens the new one.
  await page.keyboard.press("Enter");
  await connected(page);
  const after = await page.evaluate(() => ({ again: document.getElementById("again").hidden, inTerm: document.getElementById("term").contains(document.activeElement) }));
  if (!after.again || !after.inTerm) throw new Error("the new terminal: " + JSON.stringify(after) + ", want the offer gone and the keyboard in the terminal");
  await page.keyboard.type("echo mark=[$HG_MARK] after-$((7*8))\n");
  await shows(page, "mark=[] after-56");
  await shows(page, "before-42"); // the old one's output stays above
  // A shell that exits: the page says so, and offers another.
  await page.keyboard.type("exit 3\n");
  await page.waitForFunction(() => !document.getElementById("again").hidden, null, { timeout: 20000 });
  const exited = await page.textContent("#status");
  if (exited !== "exited (3)") throw new Error("after exit 3 the status is " + JSON.stringify(exited));
  await page.keyboard.press("Enter");
  await connected(page);
  await page.keyboard.type("echo third-$((8*9))\n");
  await shows(page, "third-72");
  // A shell a signal ended (a sandbox's memory limit kills with KILL too)
  // says so: it said "exited (-1)".
  await page.keyboard.type("kill -9 $$\n");
  await page.waitForFunction(() => !document.getElementById("again").hidden, null, { timeout: 20000 });
  const killed = await page.textContent("#status");
  if (killed !== "killed by signal KILL (kill -9, or out of memory)") throw new Error("after kill -9 the status is " + JSON.stringify(killed));
  await page.keyboard.press("Enter");
  await connected(page);
  await page.keyboard.type("echo fourth-$((9*9))\n");
  await shows(page, "fourth-81");
  await screenshot(page, "new-terminal");
  if (problems.length) throw new Error("the page logged:\n" + problems.join("\n"));
});
