// Measures what xterm's screen reader mode costs a flooding terminal: in
// one page, `yes` runs HOSTGATE_FLOOD_MS with the mode on, then off (the
// order alternating pair by pair, HOSTGATE_PAIRS pairs, after one flood
// not counted), and the bytes
// xterm drew meanwhile are compared, as TestBrowserTerminalCtrlCSlowPage's
// flood (the page's CPU throttled HOSTGATE_THROTTLE times). The gateway
// lets output run only as far ahead of the page as it draws, so what is
// drawn is what the page's CPU allows. With HOSTGATE_AX=1 Chromium keeps
// its accessibility tree as it does for a screen reader (DevTools'
// Accessibility.enable); without, as for nobody using one. One JSON line
// per flood and one with the ratio; nothing is asserted, and no test runs
// it: against a `gateway dev` (host local),
//   HOSTGATE_URL=http://127.0.0.1:PORT HOSTGATE_TOKEN=hg_… HOSTGATE_THROTTLE=20 node readercost.mjs
// Round 38, 6 pairs of 5 s floods: unthrottled 1.86x (ratio of the
// medians; pairs 1.37-2.42), throttled 20x 2.52x (pairs 1.24-6.36).
import { run, login, env } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");
const throttle = Number(process.env.HOSTGATE_THROTTLE || "1");
const pairs = Number(process.env.HOSTGATE_PAIRS || "4");
const floodMs = Number(process.env.HOSTGATE_FLOOD_MS || "5000");
const ax = process.env.HOSTGATE_AX === "1";

function atPrompt() {
  const buf = window.hostgateTerm.buffer.active;
  const line = buf.getLine(buf.baseY + buf.cursorY);
  return !!line && line.translateToString(true).trimEnd().endsWith("FLOODTEST$");
}

await run(async (browser) => {
  const page = await browser.newPage({ viewport: { width: 1100, height: 700 } });
  await login(page, gateway, token, "/hosts/local/terminal");
  await page.waitForFunction(() => document.getElementById("status").textContent === "connected", null, { timeout: 20000 });
  await page.evaluate(() => {
    const t = window.hostgateTerm;
    const orig = t.write.bind(t);
    window.__drawn = 0;
    t.write = (d, cb) => orig(d, () => { window.__drawn += d.length; if (cb) cb(); });
  });
  await page.keyboard.type("PS1='FLOODTEST$ '\n");
  await page.waitForFunction(atPrompt, null, { timeout: 20000 });
  const cdp = await page.context().newCDPSession(page);
  if (ax) await cdp.send("Accessibility.enable");
  if (throttle > 1) await cdp.send("Emulation.setCPUThrottlingRate", { rate: throttle });
  const got = { on: [], off: [] };
  // One flood first, not counted: a page's first is slower (its scrollback
  // fills, the code warms), which fell on the first pair's "on".
  for (let i = -1; i < pairs; i++) {
    for (const on of i < 0 ? [false] : i % 2 ? [false, true] : [true, false]) {
      await page.evaluate((on) => { window.hostgateTerm.options.screenReaderMode = on; window.hostgateTerm.focus(); }, on);
      await page.keyboard.type("yes\n");
      await page.waitForFunction(() => !(function () {
        const buf = window.hostgateTerm.buffer.active;
        const line = buf.getLine(buf.baseY + buf.cursorY);
        return !!line && line.translateToString(true).trimEnd().endsWith("FLOODTEST$");
      })(), null, { timeout: 20000, polling: 20 });
      const before = await page.evaluate(() => window.__drawn);
      const t0 = Date.now();
      await new Promise((r) => setTimeout(r, floodMs));
      const bytes = await page.evaluate(() => window.__drawn) - before;
      const ms = Date.now() - t0;
      await page.keyboard.press("Control+C");
      await page.waitForFunction(atPrompt, null, { timeout: 120000, polling: 50 });
      const rate = bytes / ms * 1000;
      if (i < 0) continue;
      got[on ? "on" : "off"].push(rate);
      console.log(JSON.stringify({ kind: "flood", pair: i, reader: on, throttle, ax, ms, bytes, kbps: Math.round(rate / 1000) }));
    }
  }
  const median = (a) => { const s = [...a].sort((x, y) => x - y); return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };
  const ratios = got.on.map((r, i) => +(got.off[i] / r).toFixed(2));
  console.log(JSON.stringify({ kind: "ratio", throttle, ax, pairs, offOverOn: ratios, medianOff: Math.round(median(got.off)), medianOn: Math.round(median(got.on)), medianRatio: +(median(got.off) / median(got.on)).toFixed(2) }));
});
