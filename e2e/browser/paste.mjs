// Logs in, opens the terminal of HOSTGATE_HOST (this machine), runs
// `cat > HOSTGATE_PASTE_TO` and pastes the contents of HOSTGATE_PASTE_FROM
// the way Ctrl+V does; the Go test compares what cat wrote.
import { existsSync, readFileSync } from "node:fs";
import { run, login, screenshot, env } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");
const host = process.env.HOSTGATE_HOST || "local";
const text = readFileSync(env("HOSTGATE_PASTE_FROM"), "utf8");
const to = env("HOSTGATE_PASTE_TO");

// waitLine waits for s on the screen, or for the terminal to end.
async function waitLine(page, s) {
  await page.waitForFunction((s) => {
    if (document.getElementById("status").textContent !== "connected") return true;
    const buf = window.hostgateTerm.buffer.active;
    for (let i = 0; i < buf.length; i++) {
      const line = buf.getLine(i);
      if (line && line.translateToString(true).includes(s)) return true;
    }
    return false;
  }, s, { timeout: 60000 });
}

await run(async (browser) => {
  const page = await browser.newPage({ viewport: { width: 1100, height: 700 } });
  await login(page, gateway, token);
  await page.goto(gateway + "/hosts/" + encodeURIComponent(host) + "/terminal");
  await page.waitForFunction(() => document.getElementById("status").textContent === "connected", null, { timeout: 20000 });
  await page.keyboard.type("cat > " + to + "; echo pasted-$((6*7))\n");
  // The shell opens the file just before it runs cat: from then on the
  // terminal is cooked and what is pasted waits for cat.
  const deadline = Date.now() + 20000;
  while (!existsSync(to)) {
    if (Date.now() > deadline) throw new Error("the shell did not start cat > " + to);
    await new Promise((r) => setTimeout(r, 50));
  }
  await page.evaluate((s) => window.hostgateTerm.paste(s), text);
  await page.keyboard.press("Control+D"); // end of input, at the start of a line
  await waitLine(page, "pasted-42");
  const status = await page.textContent("#status");
  if (status !== "connected") throw new Error("terminal status after the paste: " + status);
  await screenshot(page, "paste");
});
