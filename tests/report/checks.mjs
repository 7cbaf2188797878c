// The browser tests' checks: each prints "ok" or "FAIL" with what it checked; finish() prints the
// tally and ends the process, failing when any check failed.
let failures = 0, passes = 0;

export function check(ok, what) {
  if (ok) passes++;
  else failures++;
  console.log((ok ? "ok   " : "FAIL ") + what);
}

export function finish() {
  console.log(`${passes} passed, ${failures} failed`);
  process.exit(failures ? 1 : 0);
}
