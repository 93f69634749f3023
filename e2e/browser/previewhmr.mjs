// A dev server's hot-reload socket through a subdomain preview
// (HOSTGATE_PREVIEW_URL), as Vite's client uses it: opened with the
// "vite-hmr" subprotocol, the server's pushes and the page's messages
// (one of 1 MiB) carried both ways, a close the page starts reaching the
// dev server with its code and reason, and, when the dev server ends, the
// page's socket closing within seconds: Vite's client waits for that close
// to poll for the restarted server and reload. Then it polls as Vite's
// client does, opening "vite-ping" sockets: none may open while the dev
// server is down, and one must once it is back.
//
// Last, the page a client reloads into while its dev server is down (Vite
// before 6 pinged with a fetch, which the preview's 502 answered, and
// reloaded at once): the preview's 502 page must reload itself into the
// app once the dev server is back. It stayed on the 502.
import { run, login, screenshot, env } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");
const preview = env("HOSTGATE_PREVIEW_URL");

// step asks the Go test to act, and waits for it to have acted (the test
// reads the next line only once step returned).
async function step(what) {
  console.log("hostgate-step: " + what);
  await new Promise((res) => setTimeout(res, 200));
}

const state = (page, i) => page.evaluate((i) => { const s = window.hmr[i]; return { protocol: s.protocol, got: s.got, closed: s.closed }; }, i);

await run(async (browser) => {
  const page = await browser.newPage();
  await login(page, gateway, token);
  await page.goto(preview);
  await page.waitForSelector("#title", { timeout: 20000 });

  // Both ways, and a close the page starts.
  await page.evaluate(() => openHMR("first"));
  const want = ['{"type":"connected"}', "echo:5", '{"type":"update"}', "echo:1048576"];
  await page.waitForFunction((n) => window.hmr[0].got.length >= n, want.length, { timeout: 20000 }).catch(() => {});
  let s = await state(page, 0);
  if (s.protocol !== "vite-hmr" || JSON.stringify(s.got) !== JSON.stringify(want)) {
    throw new Error("the hot-reload socket through the preview: " + JSON.stringify(s) + ", want protocol vite-hmr and " + JSON.stringify(want));
  }
  await page.evaluate(() => window.hmr[0].ws.close(1000, "page leaves"));
  await page.waitForFunction(() => window.hmr[0].closed, null, { timeout: 10000 });
  s = await state(page, 0);
  if (s.closed.code !== 1000 || !s.closed.clean) throw new Error("the page's close came back as " + JSON.stringify(s.closed));
  await new Promise((res) => setTimeout(res, 500));
  await step("closes seen");

  // The dev server ends.
  await page.evaluate(() => openHMR("second"));
  await page.waitForFunction(() => window.hmr[1].got.length >= 4, null, { timeout: 20000 });
  const ended = Date.now();
  await step("end dev server");
  try {
    await page.waitForFunction(() => window.hmr[1].closed, null, { timeout: 15000 });
  } catch (e) {
    throw new Error("the dev server ended and the page's socket is still open after 15 s: " + JSON.stringify(await state(page, 1)));
  }
  s = await state(page, 1);
  console.log(`the page's socket closed ${s.closed.at - ended} ms after the dev server ended: ${JSON.stringify(s.closed)}`);
  if (s.closed.at - ended > 5000) throw new Error(`the page's socket closed ${s.closed.at - ended} ms after the dev server ended, want within 5 s`);

  // Vite's poll for the restarted server.
  await page.evaluate(() => {
    window.pings = { opened: 0, failed: 0 };
    const ping = () => {
      const ws = new WebSocket("ws://" + location.host + "/hmr", "vite-ping");
      ws.onopen = () => { pings.opened++; pings.openedAt = Date.now(); ws.close(); };
      ws.onerror = () => { pings.failed++; setTimeout(ping, 300); };
    };
    ping();
  });
  await page.waitForFunction(() => window.pings.failed >= 3, null, { timeout: 15000 });
  let pings = await page.evaluate(() => window.pings);
  if (pings.opened) throw new Error("a ping opened while the dev server was down: " + JSON.stringify(pings));
  const back = Date.now();
  await step("restart dev server");
  try {
    await page.waitForFunction(() => window.pings.opened > 0, null, { timeout: 15000 });
  } catch (e) {
    throw new Error("the dev server is back and no ping opened in 15 s: " + JSON.stringify(await page.evaluate(() => window.pings)));
  }
  pings = await page.evaluate(() => window.pings);
  console.log(`pings while down: ${pings.failed} failed; one opened ${pings.openedAt - back} ms after the dev server was back`);
  await screenshot(page, "hmr");

  // Reloaded while the dev server is down, and it comes back.
  await step("end dev server");
  const csp = [];
  page.on("console", (m) => { if (/Content Security Policy/.test(m.text())) csp.push(m.text()); });
  const down = await page.reload();
  if (down.status() !== 502) throw new Error("reloaded with the dev server down: " + down.status() + " " + await page.textContent("body"));
  await screenshot(page, "hmr-down");
  await new Promise((res) => setTimeout(res, 1500));
  const upAt = Date.now();
  await step("restart dev server");
  try {
    await page.waitForSelector("#title", { timeout: 20000 });
  } catch (e) {
    throw new Error("the dev server is back and the page is still the preview's 502 after 20 s: " + (await page.textContent("body")) + (csp.length ? " (" + csp.join("; ") + ")" : ""));
  }
  console.log(`the 502 page reloaded into the app ${Date.now() - upAt} ms after the dev server was back`);
  if (csp.length) throw new Error("Content Security Policy reports: " + csp.join("; "));
});
