// Shared setup for the browser scripts: Debian's Chromium, headless, with the
// flags this closed network needs, and a screenshot helper writing into
// HOSTGATE_ARTIFACTS.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

export async function launch() {
  return chromium.launch({
    executablePath: process.env.HOSTGATE_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: [
      "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
      // A preview domain other than localhost, mapped to loopback.
      ...(process.env.HOSTGATE_RESOLVER_RULES ? ["--host-resolver-rules=" + process.env.HOSTGATE_RESOLVER_RULES] : []),
    ],
  });
}

export async function screenshot(page, name) {
  const dir = process.env.HOSTGATE_ARTIFACTS || "artifacts";
  mkdirSync(dir, { recursive: true });
  const path = join(dir, name + ".png");
  await page.screenshot({ path, fullPage: true });
  console.log("screenshot " + path);
}

export function env(name) {
  const v = process.env[name];
  if (!v) throw new Error("missing environment variable " + name);
  return v;
}

export async function login(page, gateway, token, next = "/") {
  await page.goto(gateway + "/login?next=" + encodeURIComponent(next));
  await page.fill("#token", token);
  await Promise.all([page.waitForNavigation(), page.click("#login")]);
}

// run wraps a script body: any failure prints and exits non-zero so the Go
// test sees it.
export async function run(body) {
  const browser = await launch();
  try {
    await body(browser);
    console.log("ok");
  } catch (e) {
    console.error("FAIL: " + (e && e.stack || e));
    process.exitCode = 1;
  } finally {
    await browser.close();
  }
}

// screenShows waits until a line of the terminal page's screen or
// scrollback contains text.
export function screenShows(page, text, timeout = 30000) {
  return page.waitForFunction((text) => {
    const buf = window.hostgateTerm.buffer.active;
    for (let i = 0; i < buf.length; i++) {
      const line = buf.getLine(i);
      if (line && line.translateToString(true).includes(text)) return true;
    }
    return false;
  }, text, { timeout });
}

// The lowest contrast of any visible text of the page with its background
// (the first ancestor's that is not transparent), and which text. Run in
// the page: page.evaluate(lowestContrast).
export function lowestContrast() {
  const rgb = (c) => { const m = c.match(/rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)(?:,\s*([\d.]+))?/); return m && { r: +m[1], g: +m[2], b: +m[3], a: m[4] === undefined ? 1 : +m[4] }; };
  const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); }; return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b); };
  const bgOf = (el) => { for (let e = el; e; e = e.parentElement) { const c = rgb(getComputedStyle(e).backgroundColor); if (c && c.a > 0) return c; } return null; };
  let worst = null;
  for (const el of document.querySelectorAll("body *")) {
    if (el.closest(".sr, #term, script, style") || el.disabled || !el.getClientRects().length) continue;
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim()) || (el.tagName === "INPUT" && el.value);
    if (!own) continue;
    const fg = rgb(getComputedStyle(el).color), bg = bgOf(el);
    if (!fg || !bg) return { text: el.outerHTML.slice(0, 80), ratio: 0, why: "no background: the canvas shows" };
    const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
    const ratio = (a + 0.05) / (b + 0.05);
    if (!worst || ratio < worst.ratio) worst = { text: (el.value || el.textContent).trim().slice(0, 40), ratio: Math.round(ratio * 100) / 100, fg: getComputedStyle(el).color, bg: JSON.stringify(bg) };
  }
  return worst;
}
