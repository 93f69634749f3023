// A sandbox the gateway cannot create: the hosts page says so with the
// gateway's own message, and the button is usable again and keeps the
// keyboard's focus. Progress is said politely (role=status) and errors
// assertively (role=alert), in regions of their own: with one assertive
// region the progress note interrupted a screen reader, and a failed list
// refresh replaced it. Neither the progress nor the failure goes when the
// list's refresh every 5 s fails or succeeds; the failure goes when the
// person dismisses it.
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

  const regions = () => page.evaluate(() => {
    const p = document.getElementById("progress"), e = document.getElementById("error");
    const msg = (o) => { const m = e.querySelector('[data-owner="' + o + '"] span'); return m && m.textContent; };
    return { progress: p && p.textContent, progressRole: p && p.getAttribute("role"), alertRole: e.getAttribute("role"), alert: e.textContent, list: msg("list"), sandbox: msg("sandbox") };
  });
  // The list's refresh fails as when the network drops: refused.
  let refused = 0;
  const refuse = (route) => { refused++; return route.abort("connectionrefused"); };

  // The sandbox's request is held while the list's refresh fails, twice.
  let held;
  const heldSeen = new Promise((resolve) => {
    page.route("**/v1/executions", (route) => { held = route; resolve(); });
  });
  await button.focus();
  await page.keyboard.press("Enter");
  await heldSeen;
  await page.route("**/v1/hosts", refuse);
  await page.waitForFunction(() => /^Could not list hosts: /.test(document.getElementById("error").textContent), null, { timeout: 15000 });
  // One more refresh, 5 s later, fails too.
  const since = refused;
  for (const end = Date.now() + 15000; refused <= since;) {
    if (Date.now() > end) throw new Error("the list was not refreshed within 15 s");
    await new Promise((r) => setTimeout(r, 200));
  }
  let r = await regions();
  console.log("while starting, the list failing: " + JSON.stringify(r));
  if (!/^Starting a sandbox: /.test(r.progress) || r.progressRole !== "status" || r.alertRole !== "alert" || !/^Could not list hosts: /.test(r.list) || r.sandbox) {
    throw new Error("while the sandbox starts and the list's refresh fails the page says " + JSON.stringify(r) +
      ": want the progress in role=status and the list's error in role=alert");
  }
  await page.unroute("**/v1/hosts", refuse);
  await screenshot(page, "sandbox-starting-list-failed");

  // The gateway's real answer: the failure, in the alert.
  await held.continue();
  await page.unroute("**/v1/executions");
  const said = "Could not start a sandbox: " + want.message;
  await page.waitForFunction((said) => {
    const m = document.querySelector('#error [data-owner="sandbox"] span');
    return m && m.textContent === said;
  }, said, { timeout: 120000 });
  const after = await page.evaluate(() => {
    const b = document.getElementById("new-sandbox");
    return { disabled: b.disabled, label: b.textContent, focused: document.activeElement === b, progress: document.getElementById("progress").textContent };
  });
  if (after.disabled || after.label !== "New sandbox" || !after.focused || after.progress !== "") throw new Error("after the failure the page is " + JSON.stringify(after));

  // A good refresh takes the list's error away and leaves the failure; a
  // failing one adds its error beside it.
  const listSaid = () => page.evaluate(() => !!document.querySelector('#error [data-owner="list"]'));
  await page.waitForFunction(() => !document.querySelector('#error [data-owner="list"]'), null, { timeout: 15000 });
  r = await regions();
  if (r.sandbox !== said) throw new Error("after a good refresh of the list the page says " + JSON.stringify(r) + ", want " + JSON.stringify(said));
  const n = refused;
  await page.route("**/v1/hosts", refuse);
  for (const end = Date.now() + 15000; refused <= n || !(await listSaid());) {
    if (Date.now() > end) throw new Error("no refresh of the list failed within 15 s");
    await new Promise((r) => setTimeout(r, 200));
  }
  r = await regions();
  if (r.sandbox !== said || !/^Could not list hosts: /.test(r.list)) throw new Error("the list failing after the sandbox failed, the page says " + JSON.stringify(r));
  await screenshot(page, "sandbox-failed-list-failed");
  await page.unroute("**/v1/hosts", refuse);
  await page.waitForFunction(() => !document.querySelector('#error [data-owner="list"]'), null, { timeout: 15000 });
  r = await regions();
  if (r.sandbox !== said || r.list !== null) throw new Error("after the list's refresh the page says " + JSON.stringify(r) + ", want only " + JSON.stringify(said));

  // Dismissed, it goes, and the keyboard is back on the button.
  await page.click('#error [data-owner="sandbox"] button.dismiss');
  const gone = await page.evaluate(() => ({ alert: document.getElementById("error").textContent, focused: document.activeElement && document.activeElement.id }));
  if (gone.alert !== "" || gone.focused !== "new-sandbox") throw new Error("after Dismiss the page is " + JSON.stringify(gone));
});
