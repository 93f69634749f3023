// A real Vite dev server through the preview, as a person uses it: the
// path form a link gives, which a logged-in browser is sent on from to the
// subdomain form, renders the app's module; an edit to a source file
// reaches the open tab through Vite's hot reload, without a reload (a mark
// on window survives); the dev server stopped and started again, the tab
// reloads itself back into the app, as it does without the gateway; and
// so it does when the gateway restarts (HOSTGATE_RESTART_GATEWAY).
import { run, login, screenshot, env } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");
const pathForm = env("HOSTGATE_PATH_URL");
const subdomain = env("HOSTGATE_PREVIEW_URL");

async function step(what) {
  console.log("hostgate-step: " + what);
  await new Promise((res) => setTimeout(res, 200));
}

const message = (page) => page.evaluate(() => document.getElementById("message")?.textContent);

await run(async (browser) => {
  const page = await browser.newPage();
  const logs = [], errors = [], failed = [];
  let loads = 0;
  page.on("console", (m) => logs.push(m.text()));
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("load", () => loads++);
  page.on("response", (r) => { if (r.status() >= 400) failed.push(r.status() + " " + r.url()); });
  const saw = (re, timeout) => new Promise((res, rej) => {
    const t0 = Date.now();
    const poll = () => {
      if (logs.some((l) => re.test(l))) return res(Date.now() - t0);
      if (Date.now() - t0 > timeout) return rej(new Error(`the page's console did not say ${re} in ${timeout} ms: ${JSON.stringify(logs)}`));
      setTimeout(poll, 50);
    };
    poll();
  });

  await login(page, gateway, token);
  await page.goto(pathForm);
  if (!page.url().startsWith(subdomain)) throw new Error(`the path form ${pathForm} ended at ${page.url()}, want the subdomain form ${subdomain}`);
  try {
    await page.waitForFunction(() => document.getElementById("message")?.textContent === "rendered by a module", null, { timeout: 20000 });
  } catch (e) {
    throw new Error(`the app's module did not render: #message is ${JSON.stringify(await message(page))}; failed requests ${JSON.stringify(failed)}; errors ${JSON.stringify(errors)}; console ${JSON.stringify(logs)}`);
  }
  await saw(/^\[vite\] connected/, 10000);
  await screenshot(page, "vite");

  // Hot reload: the edit shows, the page stays.
  await page.evaluate(() => { window.hgMark = "kept"; });
  const loadsBefore = loads;
  const editAt = Date.now();
  await step("edit source");
  try {
    await page.waitForFunction(() => document.getElementById("message")?.textContent === "updated through HMR", null, { timeout: 15000 });
  } catch (e) {
    throw new Error(`the edit did not reach the page in 15 s: #message is ${JSON.stringify(await message(page))}; console ${JSON.stringify(logs)}`);
  }
  console.log(`the edit showed ${Date.now() - editAt} ms after it was saved`);
  const mark = await page.evaluate(() => window.hgMark);
  if (mark !== "kept" || loads !== loadsBefore) throw new Error(`the edit reloaded the page (mark ${mark}, ${loads - loadsBefore} loads): hot reload did not apply it in place; console ${JSON.stringify(logs)}`);
  await saw(/^\[vite\] hot updated: \/src\/message\.js/, 5000);

  // The dev server stops and starts again: the tab comes back to the app.
  await step("stop dev server");
  await saw(/server connection lost/, 10000);
  await new Promise((res) => setTimeout(res, 1500));
  const upAt = Date.now();
  await step("start dev server");
  try {
    await page.waitForFunction(() => window.hgMark === undefined && document.getElementById("message")?.textContent === "updated through HMR", null, { timeout: 20000 });
  } catch (e) {
    const body = await page.evaluate(() => document.body?.innerText).catch((e) => String(e));
    throw new Error(`the dev server is back and the tab is not back in the app after 20 s: ${JSON.stringify(body)}; console ${JSON.stringify(logs)}`);
  }
  console.log(`the tab was back in the app ${Date.now() - upAt} ms after the dev server started again`);
  if (!page.url().startsWith(subdomain)) throw new Error("the tab came back at " + page.url());
  await screenshot(page, "vite-back");

  // The gateway restarts (an upgrade): the tab comes back to the app too.
  if (process.env.HOSTGATE_RESTART_GATEWAY) {
    await page.evaluate(() => { window.hgMark = "kept"; });
    logs.length = 0;
    await step("restart gateway");
    const gwAt = Date.now();
    try {
      await page.waitForFunction(() => window.hgMark === undefined && document.getElementById("message")?.textContent === "updated through HMR", null, { timeout: 20000 });
    } catch (e) {
      const body = await page.evaluate(() => document.body?.innerText).catch((e) => String(e));
      throw new Error(`the gateway restarted and the tab is not back in the app after 20 s: ${JSON.stringify(body)}; console (first 3 of ${logs.length}) ${JSON.stringify(logs.slice(0, 3))}`);
    }
    console.log(`the tab was back in the app ${Date.now() - gwAt} ms after the gateway restarted`);
    await screenshot(page, "vite-gateway-back");
  }
  if (errors.length) throw new Error("errors in the page: " + JSON.stringify(errors));
});
