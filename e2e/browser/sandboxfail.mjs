// A sandbox the gateway cannot create: the hosts page says so with the
// gateway's own message, in its live region, and keeps saying it across
// the list's refresh every 5 s (which wiped it); the button is usable
// again and keeps the keyboard's focus.
import { run, login, screenshot, env } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");

await run(async (browser) => {
  const page = await browser.newPage({ viewport: { width: 1100, height: 700 } });
  await login(page, gateway, token);
  const button = page.locator("#new-sandbox");
  await button.waitFor({ state: "visible", timeout: 20000 });
  // The gateway's answer to the same request, as the API gives it.
  const want = await page.evaluate(async () => {
    const me = await (await fetch("/v1/me")).json();
    const res = await fetch("/v1/executions", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(me.sandboxDefaults) });
    return { status: res.status, message: (await res.json()).error.message };
  });
  if (want.status < 400 || !want.message) throw new Error("the gateway created the sandbox: " + JSON.stringify(want));
  console.log("the gateway says: " + want.status + " " + want.message);

  await button.focus();
  await page.keyboard.press("Enter");
  const said = "Could not start a sandbox: " + want.message;
  await page.waitForFunction((said) => document.getElementById("error").textContent === said, said, { timeout: 120000 });
  await screenshot(page, "sandbox-failed");
  const after = await page.evaluate(() => {
    const b = document.getElementById("new-sandbox");
    return { disabled: b.disabled, label: b.textContent, focused: document.activeElement === b };
  });
  if (after.disabled || after.label !== "New sandbox" || !after.focused) throw new Error("after the failure the button is " + JSON.stringify(after));
  // Two refreshes of the list later the message is still there.
  await page.evaluate(() => { window.rowBefore = document.querySelector("#hosts tbody tr"); });
  await page.waitForFunction(() => { const r = document.querySelector("#hosts tbody tr"); return r && r !== window.rowBefore; }, null, { timeout: 15000 });
  const still = await page.textContent("#error");
  if (still !== said) throw new Error("after the list's refresh the page says " + JSON.stringify(still) + ", not " + JSON.stringify(said));
});
