// The preview's own pages, those a browser gets when a preview cannot be
// served, in the dark and the light scheme: each says it supports both
// (meta and CSS color-scheme), its background follows the scheme, and its
// text keeps a contrast of 4.5 or more. They were light in a dark-mode
// browser whose gateway pages were dark.
//
// And each is read as a screen reader reads it: its title says what
// happened (it said "502 Bad Gateway · preview", no host, no port), the
// message is its one main landmark, and the next step is a link: "Reload
// this page" where the trouble may pass (5xx), and the gateway's host list
// on the gateway's origin, which is another site than a preview's. There
// were no landmark and no link: a person on a preview origin had no way
// back but the address bar. A viewer whom a public share alone lets in
// has no token: their pages link no host list, which led them to a login
// they could not pass. HOSTGATE_PREVIEW_PAGES is a JSON list of [kind,
// URL, status, a text the page says, and a token to log in with first,
// where another than the admin's, or "shared" for a viewer not logged in].
import { run, login, screenshot, env, lowestContrast } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");
const kinds = JSON.parse(env("HOSTGATE_PREVIEW_PAGES"));

await run(async (browser) => {
  for (const scheme of ["dark", "light"]) {
    const ctx = await browser.newContext({ colorScheme: scheme, viewport: { width: 800, height: 600 } });
    const page = await ctx.newPage();
    const csp = [];
    page.on("console", (m) => { if (/Content Security Policy/.test(m.text())) csp.push(m.text()); });
    await login(page, gateway, token);
    const stranger = await (await browser.newContext({ colorScheme: scheme, viewport: { width: 800, height: 600 } })).newPage();
    stranger.on("console", (m) => { if (/Content Security Policy/.test(m.text())) csp.push(m.text()); });
    for (const [kind, url, status, says, as] of kinds) {
      const shared = as === "shared";
      if (as && !shared) await login(page, gateway, as);
      const viewer = shared ? stranger : page;
      const resp = await viewer.goto(url);
      await screenshot(viewer, kind + "-" + scheme);
      const text = await viewer.textContent("body");
      if (resp.status() !== status || !text.includes(says)) {
        throw new Error(`${kind} (${url}): ${resp.status()} ${JSON.stringify(text)}, want ${status} saying ${JSON.stringify(says)}`);
      }
      const got = await viewer.evaluate(() => ({ scheme: getComputedStyle(document.documentElement).colorScheme, meta: document.querySelector('meta[name="color-scheme"]')?.content || "", bg: getComputedStyle(document.body).backgroundColor }));
      for (const s of ["dark", "light"]) {
        if (!got.scheme.split(" ").includes(s) || !got.meta.split(" ").includes(s)) throw new Error(`${kind} page: color-scheme ${JSON.stringify(got)} does not name ${s}`);
      }
      const [r, g, b] = (got.bg.match(/\d+/g) || [255, 255, 255]).map(Number);
      if (((r + g + b) / 3 > 128) !== (scheme === "light")) throw new Error(`${kind} page in the ${scheme} scheme has background ${got.bg}`);
      const worst = await viewer.evaluate(lowestContrast);
      if (!worst || worst.ratio < 4.5) throw new Error(`${kind} page, ${scheme} scheme: text of contrast ${JSON.stringify(worst)}, want 4.5 or more`);
      const title = await viewer.title();
      if (!title.includes(says.replace(/\.$/, "")) || !title.includes(String(status))) throw new Error(`${kind} page: title ${JSON.stringify(title)} does not say ${JSON.stringify(says.replace(/\.$/, ""))} (${status})`);
      const main = viewer.getByRole("main");
      if (await main.count() !== 1) throw new Error(`${kind} page: ${await main.count()} main landmarks, want 1`);
      const heading = await main.getByRole("heading", { level: 1 }).textContent();
      if (!heading.includes(says)) throw new Error(`${kind} page: its main landmark's heading is ${JSON.stringify(heading)}`);
      const why = await main.locator("h1 + p").textContent({ timeout: 2000 }).catch(() => "");
      if (why.length < 20) throw new Error(`${kind} page: nothing under the heading says why or what to do (${JSON.stringify(why)})`);
      const home = main.getByRole("link", { name: "The gateway's host list" });
      const homeHref = await home.count() === 1 ? await home.evaluate((a) => a.href) : "";
      if (shared && homeHref) throw new Error(`${kind} page, seen through a share by a viewer with no token: it links the gateway's host list (${homeHref}), a login they cannot pass`);
      if (!shared && homeHref !== gateway + "/") throw new Error(`${kind} page: the link to the gateway's host list goes to ${JSON.stringify(homeHref)}, want ${gateway}/`);
      const reload = main.getByRole("link", { name: "Reload this page" });
      const reloads = await reload.count();
      if (reloads !== (status >= 500 ? 1 : 0)) throw new Error(`${kind} page (${status}): ${reloads} "Reload this page" links`);
      if (reloads && await reload.evaluate((a) => a.href !== location.href)) throw new Error(`${kind} page: "Reload this page" goes to ${await reload.evaluate((a) => a.href)}`);
      const waits = (await main.getByText("This page reloads itself when the preview answers.").count()) === 1;
      if (waits !== (status === 502 || status === 503)) throw new Error(`${kind} page (${status}): says it reloads itself: ${waits}`);
      if (csp.length) throw new Error(`${kind} page: Content Security Policy reports: ${csp.join("; ")}`);
      console.log(`${kind} ${scheme}: ${resp.status()}, title ${JSON.stringify(title)}, then ${JSON.stringify(why)}, lowest contrast ${worst.ratio} (${JSON.stringify(worst.text)})`);
    }
    // The path form, logged in with a token for other hosts: the login
    // page says why it shows (it showed as if logged out).
    await page.goto(gateway + "/preview/gone/3000/");
    await page.waitForURL((u) => u.pathname === "/login", { timeout: 10000 });
    const why = await page.textContent("#error");
    if (!why.includes("does not reach the host of the page you opened")) throw new Error(`path form, a token for other hosts: the login page says ${JSON.stringify(why)} at ${page.url()}`);
    // From a preview origin, the way back reaches the gateway's hosts.
    await login(page, gateway, token);
    await page.goto(kinds.find(([k]) => k === "bad-ticket")[1]);
    await Promise.all([page.waitForURL(gateway + "/"), page.getByRole("link", { name: "The gateway's host list" }).click()]);
    await page.locator("#hosts tbody tr").first().waitFor({ timeout: 20000 });
    await ctx.close();
    await stranger.context().close();
  }
});
