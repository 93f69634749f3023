// Measures a flooding terminal in the page, optionally with the CPU
// throttled (HOSTGATE_THROTTLE, DevTools' Emulation.setCPUThrottlingRate:
// a slow laptop or phone). Each of HOSTGATE_RUNS runs `yes` for
// HOSTGATE_FLOOD_MS, presses Ctrl-C and waits (at most HOSTGATE_WAIT_MS)
// for the prompt: it prints the time from Ctrl-C to the prompt and the
// bytes drawn meanwhile. With HOSTGATE_CAT set it also cats that file and
// prints the MB/s drawn. One JSON line per measurement; nothing asserts a
// time here, the Go test that runs it asserts on bytes.
import { run, login, env } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");
const host = process.env.HOSTGATE_HOST || "local";
const throttle = Number(process.env.HOSTGATE_THROTTLE || "1");
const runs = Number(process.env.HOSTGATE_RUNS || "1");
const floodMs = Number(process.env.HOSTGATE_FLOOD_MS || "10000");
const waitMs = Number(process.env.HOSTGATE_WAIT_MS || "60000");
const catFile = process.env.HOSTGATE_CAT || "";

// atPrompt: the cursor's line is a fresh prompt.
function atPrompt() {
  const buf = window.hostgateTerm.buffer.active;
  const line = buf.getLine(buf.baseY + buf.cursorY);
  return !!line && line.translateToString(true).trimEnd().endsWith("FLOODTEST$");
}

// left: the command typed has started (the cursor left the prompt).
async function started(page) {
  await page.waitForFunction(() => {
    const buf = window.hostgateTerm.buffer.active;
    const line = buf.getLine(buf.baseY + buf.cursorY);
    return !!line && !line.translateToString(true).trimEnd().endsWith("FLOODTEST$");
  }, null, { timeout: 20000, polling: 20 });
}

async function waitPrompt(page, timeout) {
  try {
    await page.waitForFunction(atPrompt, null, { timeout, polling: 50 });
    return true;
  } catch (e) {
    if (e.name === "TimeoutError") return false;
    throw e;
  }
}

const drawn = (page) => page.evaluate(() => window.__drawn);

await run(async (browser) => {
  const page = await browser.newPage({ viewport: { width: 1100, height: 700 } });
  await login(page, gateway, token);
  await page.goto(gateway + "/hosts/" + encodeURIComponent(host) + "/terminal");
  await page.waitForFunction(() => document.getElementById("status").textContent === "connected", null, { timeout: 20000 });
  // Count what xterm has parsed: the page's own write callbacks count it.
  await page.evaluate(() => {
    const t = window.hostgateTerm;
    const orig = t.write.bind(t);
    window.__drawn = 0;
    t.write = (d, cb) => orig(d, () => { window.__drawn += d.length; if (cb) cb(); });
  });
  await page.keyboard.type("PS1='FLOODTEST$ '\n");
  if (!(await waitPrompt(page, 20000))) throw new Error("no prompt before the flood: " + await page.evaluate(() => { const b = window.hostgateTerm.buffer.active; const out = []; for (let i = 0; i < b.length; i++) out.push(JSON.stringify(b.getLine(i).translateToString(true))); return out.filter((l) => l !== "\"\"").join("\n") + " cursor " + b.baseY + "+" + b.cursorY; }));
  if (throttle > 1) {
    const cdp = await page.context().newCDPSession(page);
    await cdp.send("Emulation.setCPUThrottlingRate", { rate: throttle });
  }
  const floods = process.env.HOSTGATE_YES === "0" ? 0 : runs;
  for (let i = 0; i < floods; i++) {
    await page.keyboard.type("yes\n");
    await started(page);
    await new Promise((r) => setTimeout(r, floodMs));
    const before = await drawn(page);
    const t0 = Date.now();
    await page.keyboard.press("Control+C");
    const back = await waitPrompt(page, waitMs);
    const ms = Date.now() - t0;
    const after = await drawn(page) - before;
    console.log(JSON.stringify({ kind: "ctrlc", throttle, run: i, floodMs, back, ms, bytesAfter: after, drawnBefore: before }));
    if (!back) {
      // Not back: a measurement, not a failure, but the next run needs a
      // prompt; give it a long while more.
      const lateMs = Number(process.env.HOSTGATE_LATE_MS || String(10 * waitMs));
      if (!(await waitPrompt(page, lateMs))) { console.log(JSON.stringify({ kind: "ctrlc-never", throttle, run: i, ms: Date.now() - t0, bytesAfter: await drawn(page) - before })); return; }
      console.log(JSON.stringify({ kind: "ctrlc-late", throttle, run: i, ms: Date.now() - t0, bytesAfter: await drawn(page) - before }));
    }
  }
  if (catFile) {
    for (let i = 0; i < runs; i++) {
      const before = await drawn(page);
      const t0 = Date.now();
      await page.keyboard.type("cat " + catFile + "\n");
      await started(page);
      if (!(await waitPrompt(page, 10 * waitMs))) throw new Error("cat did not finish");
      const ms = Date.now() - t0;
      const bytes = await drawn(page) - before;
      console.log(JSON.stringify({ kind: "cat", throttle, run: i, ms, bytes, mbps: +(bytes / ms / 1000).toFixed(2) }));
    }
  }
});
