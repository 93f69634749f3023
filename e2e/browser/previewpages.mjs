// The preview's own pages, those a browser gets when a preview cannot be
// served, in the dark and the light scheme: each says it supports both
// (meta and CSS color-scheme), its background follows the scheme, and its
// text keeps a contrast of 4.5 or more. They were light in a dark-mode
// browser whose gateway pages were dark. HOSTGATE_PREVIEW_PAGES is a JSON
// list of [kind, URL, status, a text the page says].
import { run, login, screenshot, env, lowestContrast } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");
const kinds = JSON.parse(env("HOSTGATE_PREVIEW_PAGES"));

await run(async (browser) => {
  for (const scheme of ["dark", "light"]) {
    const ctx = await browser.newContext({ colorScheme: scheme, viewport: { width: 800, height: 600 } });
    const page = await ctx.newPage();
    await login(page, gateway, token);
    for (const [kind, url, status, says] of kinds) {
      const resp = await page.goto(url);
      await screenshot(page, kind + "-" + scheme);
      const text = await page.textContent("body");
      if (resp.status() !== status || !text.includes(says)) {
        throw new Error(`${kind} (${url}): ${resp.status()} ${JSON.stringify(text)}, want ${status} saying ${JSON.stringify(says)}`);
      }
      const got = await page.evaluate(() => ({ scheme: getComputedStyle(document.documentElement).colorScheme, meta: document.querySelector('meta[name="color-scheme"]')?.content || "", bg: getComputedStyle(document.body).backgroundColor }));
      for (const s of ["dark", "light"]) {
        if (!got.scheme.split(" ").includes(s) || !got.meta.split(" ").includes(s)) throw new Error(`${kind} page: color-scheme ${JSON.stringify(got)} does not name ${s}`);
      }
      const [r, g, b] = (got.bg.match(/\d+/g) || [255, 255, 255]).map(Number);
      if (((r + g + b) / 3 > 128) !== (scheme === "light")) throw new Error(`${kind} page in the ${scheme} scheme has background ${got.bg}`);
      const worst = await page.evaluate(lowestContrast);
      if (!worst || worst.ratio < 4.5) throw new Error(`${kind} page, ${scheme} scheme: text of contrast ${JSON.stringify(worst)}, want 4.5 or more`);
      console.log(`${kind} ${scheme}: ${resp.status()}, lowest contrast ${worst.ratio} (${JSON.stringify(worst.text)})`);
    }
    await ctx.close();
  }
});
