// A host whose agent is not connected: its Terminal button is off (no
// link, aria-disabled) and its tooltip and accessible description say how
// to bring the agent back; clicking it goes nowhere. Once the agent
// connects again, the list's refresh every 5 s turns the button on without
// moving the keyboard's focus.
import { run, login, screenshot, env } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");

await run(async (browser) => {
  const page = await browser.newPage({ viewport: { width: 360, height: 740 }, isMobile: true, hasTouch: true });
  const problems = [];
  page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") problems.push(m.type() + ": " + m.text()); });
  page.on("pageerror", (e) => problems.push("uncaught: " + e.message));
  await login(page, gateway, token);
  const button = page.locator('#hosts tbody tr[data-host="box"] .terminal-link');
  await button.waitFor({ timeout: 20000 });
  await screenshot(page, "offline-360");
  const off = await button.evaluate((a) => ({ href: a.getAttribute("href"), disabled: a.getAttribute("aria-disabled"), title: a.title, tabIndex: a.tabIndex }));
  if (off.href !== null || off.disabled !== "true" || !off.title.includes("agent connect --gateway " + gateway) || off.tabIndex !== 0) {
    throw new Error("the Terminal button of offline host box: " + JSON.stringify(off));
  }
  const snap = await page.locator('#hosts tbody tr[data-host="box"]').ariaSnapshot();
  if (!snap.includes("box (offline)") || !/link "Terminal on box" \[disabled\]/.test(snap)) throw new Error("the offline row reads as:\n" + snap);
  // force: playwright itself holds back clicks on an aria-disabled element.
  await button.click({ force: true });
  await page.waitForTimeout(500);
  if (!page.url().endsWith("/")) throw new Error("clicking the offline host's Terminal went to " + page.url());

  // The keyboard is on Log out when the agent comes back.
  await page.focus("header button[type=submit]");
  console.log("hostgate-step: start agent box");
  await page.waitForFunction(() => {
    const a = document.querySelector('#hosts tbody tr[data-host="box"] .terminal-link');
    return a && a.getAttribute("href") && !a.hasAttribute("aria-disabled") && !a.title;
  }, null, { timeout: 30000 });
  await screenshot(page, "online-360");
  const focus = await page.evaluate(() => document.activeElement.outerHTML);
  if (!focus.includes("Log out")) throw new Error("the refresh that turned the button on moved the focus to " + focus);
  await Promise.all([page.waitForURL(/\/hosts\/box\/terminal$/), button.click()]);
  await page.waitForFunction(() => document.getElementById("status").textContent === "connected", null, { timeout: 30000 });
  if (problems.length) throw new Error("the console says:\n" + problems.join("\n"));
});
