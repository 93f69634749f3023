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
