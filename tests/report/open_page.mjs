// Opens a page in Debian's chromium (headless, driven by playwright-core) for the report's browser
// tests, and waits until `selector` is drawn. A slow start is waited for (up to `limitMs` a step:
// playwright's own 30 s was passed on a loaded machine); a browser that hangs in starting or
// drawing (seen once under load: chromium never answered, the test ran into ctest's timeout) is
// closed and started again, up to `tries` times in all, each retry said on stdout. The checks
// that follow are the tests' own, never retried.
//   const { browser, page } = await openPage(chromium, url, "#board tbody tr", (page) => {...});
// `setup(page)` runs on each new page before it loads (listeners, and clearing what a failed
// attempt collected).
export async function openPage(chromium, url, selector, setup, { limitMs = 150000, tries = 3 } = {}) {
  for (let attempt = 1; ; attempt++) {
    let browser;
    try {
      browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"], timeout: limitMs });
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      page.setDefaultTimeout(limitMs);
      setup(page);
      await page.goto(url, { timeout: limitMs });
      await page.waitForSelector(selector, { timeout: limitMs });
      return { browser, page };
    } catch (e) {
      if (browser) await Promise.race([browser.close().catch(() => {}), new Promise((r) => setTimeout(r, 10000))]);
      if (attempt >= tries) throw e;
      console.log(`browser attempt ${attempt} of ${tries} failed (${String(e.message).split("\n")[0]}); starting it again`);
    }
  }
}
