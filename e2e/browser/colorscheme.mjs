// Dark and light schemes: every page says it supports both (meta
// color-scheme, CSS color-scheme), so a dark-mode browser paints its canvas
// and form controls dark before the stylesheet loads (it flashed white, and
// the login field was a white box on the dark page), and every text on the
// login, hosts, terminal and 404 pages keeps a contrast of at least 4.5
// against what is behind it, in both schemes. The edge of a text field or
// an off toggle keeps 3 or more against what is around it, so it shows
// where the control is: it was 1.3-1.5, the login's fields nearly
// invisible boxes on the panel (WCAG 1.4.11).
import { run, login, screenshot, env, lowestContrast } from "./lib.mjs";

const gateway = env("HOSTGATE_URL");
const token = env("HOSTGATE_TOKEN");

// The lowest contrast of a text field's or an off toggle's edge (its
// border, or its inset box-shadow line) with what is around it: the edge
// is what shows where the control is (WCAG 1.4.11 wants 3 or more).
function lowestBoundary() {
  const rgb = (c) => { const m = c && c.match(/rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)(?:,\s*([\d.]+))?/); return m && { r: +m[1], g: +m[2], b: +m[3], a: m[4] === undefined ? 1 : +m[4] }; };
  const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); }; return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b); };
  const bgOf = (el) => { for (let e = el; e; e = e.parentElement) { const c = rgb(getComputedStyle(e).backgroundColor); if (c && c.a > 0) return c; } return null; };
  let worst = null;
  for (const el of document.querySelectorAll('input:not([type="hidden"]), button.toggle[aria-pressed="false"]')) {
    if (!el.getClientRects().length) continue;
    const cs = getComputedStyle(el);
    const edge = parseFloat(cs.borderTopWidth) > 0 && cs.borderTopStyle !== "none" ? rgb(cs.borderTopColor) : rgb(cs.boxShadow);
    const around = bgOf(el.parentElement);
    if (!edge || !around) { worst = { what: el.id || el.outerHTML.slice(0, 60), ratio: 0, why: "no edge" }; break; }
    const [a, b] = [lum(edge), lum(around)].sort((x, y) => y - x);
    const ratio = Math.round((a + 0.05) / (b + 0.05) * 100) / 100;
    if (!worst || ratio < worst.ratio) worst = { what: el.id || el.tagName, ratio, edge: JSON.stringify(edge), around: JSON.stringify(around) };
  }
  return worst;
}

await run(async (browser) => {
  for (const scheme of ["dark", "light"]) {
    const ctx = await browser.newContext({ colorScheme: scheme, viewport: { width: 800, height: 600 } });

    // Before the stylesheet: the browser's own colours follow the scheme.
    const bare = await ctx.newPage();
    await bare.route("**/static/style.css", (r) => r.abort());
    await bare.goto(gateway + "/login");
    const early = await bare.evaluate(() => ({ text: getComputedStyle(document.body).color, field: getComputedStyle(document.getElementById("token")).backgroundColor }));
    const white = "rgb(255, 255, 255)";
    if (scheme === "dark" && (early.text !== white || early.field === white)) {
      throw new Error("dark scheme, before the stylesheet loads: text " + early.text + ", token field " + early.field + "; the page is painted light");
    }
    await bare.close();

    const page = await ctx.newPage();
    const pages = [
      ["login", async () => page.goto(gateway + "/login?error=invalid_token")],
      ["hosts", async () => { await login(page, gateway, token); await page.locator("#hosts tbody tr").first().waitFor({ timeout: 20000 }); }],
      ["terminal", async () => { await page.goto(gateway + "/hosts/local/terminal"); await page.waitForFunction(() => document.getElementById("status").textContent === "connected", null, { timeout: 30000 }); }],
      ["404", async () => page.goto(gateway + "/no/such/page")],
    ];
    for (const [name, open] of pages) {
      await open();
      await screenshot(page, name + "-" + scheme);
      const got = await page.evaluate(() => ({ scheme: getComputedStyle(document.documentElement).colorScheme, meta: document.querySelector('meta[name="color-scheme"]')?.content || "", bg: getComputedStyle(document.body).backgroundColor }));
      for (const s of ["dark", "light"]) {
        if (!got.scheme.split(" ").includes(s) || !got.meta.split(" ").includes(s)) throw new Error(name + " page: color-scheme " + JSON.stringify(got) + " does not name " + s);
      }
      const [r, g, b] = got.bg.match(/\d+/g).map(Number);
      const light = (r + g + b) / 3 > 128;
      if (light !== (scheme === "light")) throw new Error(name + " page in the " + scheme + " scheme has background " + got.bg);
      const worst = await page.evaluate(lowestContrast);
      if (!worst || worst.ratio < 4.5) throw new Error(name + " page, " + scheme + " scheme: text of contrast " + JSON.stringify(worst) + ", want 4.5 or more");
      console.log(name + " " + scheme + ": lowest contrast " + worst.ratio + " (" + JSON.stringify(worst.text) + ")");
      const edge = await page.evaluate(lowestBoundary);
      if (edge && edge.ratio < 3) throw new Error(name + " page, " + scheme + " scheme: a control's edge has contrast " + JSON.stringify(edge) + ", want 3 or more");
      if (edge) console.log(name + " " + scheme + ": lowest control edge " + edge.ratio + " (" + edge.what + ")");
    }
    await ctx.close();
  }
});
