// The report's number formatter (src/report/assets/format.js, the same file the page inlines)
// over magnitudes from 1e-9 to 1e12, negatives, 0, NaN, integers and fractions: a table of
// inputs and the exact text each must give. 199,704 samples/s once showed as "2 K" (every
// trailing zero stripped, the integer part's too).
//   node format_test.mjs FORMAT_JS
import { createRequire } from "node:module";
import path from "node:path";
import { check, finish } from "./checks.mjs";

const formatJs = path.resolve(process.argv[2]);
const { fmt, human } = createRequire(import.meta.url)(formatJs);

// [value, digits (undefined: the default 4), expected fmt text]
const fmtTable = [
  [0, undefined, "0"], [-0, undefined, "0"], [NaN, undefined, "NaN"], [Infinity, undefined, "Infinity"],
  [-Infinity, undefined, "-Infinity"], [null, undefined, ""], [undefined, undefined, ""], ["relu", undefined, "relu"],
  // integers: whole, with thousands separators, up to 1e15
  [1, undefined, "1"], [10, undefined, "10"], [100, undefined, "100"], [1000, undefined, "1,000"],
  [199704, undefined, "199,704"], [-199704, undefined, "-199,704"], [1e6, undefined, "1,000,000"],
  [1e9, undefined, "1,000,000,000"], [1e12, undefined, "1,000,000,000,000"], [-1e12, undefined, "-1,000,000,000,000"],
  [1e15, undefined, "1e+15"],
  // fractions: 4 significant digits, exponent form below 0.001 and from 1e6 on
  [1e-9, undefined, "1e-9"], [1.5e-9, undefined, "1.5e-9"], [-2.25e-7, undefined, "-2.25e-7"],
  [1.23456e-4, undefined, "1.235e-4"], [0.001, undefined, "0.001"], [0.0012345, undefined, "0.001235"],
  [0.01, undefined, "0.01"], [0.1, undefined, "0.1"], [0.5, undefined, "0.5"], [-0.5, undefined, "-0.5"],
  [0.6931471805599453, undefined, "0.6931"], [1.5, undefined, "1.5"], [10.25, undefined, "10.25"],
  [100.5, undefined, "100.5"], [1000.5, undefined, "1,001"], [1999.96, undefined, "2,000"],
  [12345.678, undefined, "12,350"], [199704.5, undefined, "199,700"], [-199704.5, undefined, "-199,700"],
  [999999.5, undefined, "1,000,000"], [1234567.5, undefined, "1.235e+6"], [1.5e12 + 0.5, undefined, "1.5e+12"],
  // other digit counts
  [0.6931471805599453, 5, "0.69315"], [0.6931471805599453, 6, "0.693147"], [12345.678, 6, "12,345.7"],
  [1e-9 / 3, 3, "3.33e-10"],
];
for (const [v, d, want] of fmtTable) {
  const got = fmt(v, d);
  check(got === want, `fmt(${String(v)}${d ? ", " + d : ""}) = "${got}" (expected "${want}")`);
}

// [value, unit, expected human text]: 3 significant digits in K, M, G, T
const humanTable = [
  [0, "", "0"], [NaN, "", "NaN"], [null, "", ""], [1e-9, "", "1e-9"], [0.5, "", "0.5"], [7, "", "7"],
  [999, "", "999"], [999.6, "", "1 K"], [1000, "", "1 K"], [1234, "", "1.23 K"], [199704, "", "200 K"],
  [-199704, "", "-200 K"], [199704, "FLOP", "200 KFLOP"], [999999, "", "1 M"], [1e6, "", "1 M"],
  [2.5e7, "", "25 M"], [1e9, "", "1 G"], [3.21e9, "FLOP", "3.21 GFLOP"], [1e12, "", "1 T"],
  [1.5e12, "", "1.5 T"], [2e15, "", "2,000 T"], [42, "FLOP", "42 FLOP"],
];
for (const [v, unit, want] of humanTable) {
  const got = human(v, unit);
  check(got === want, `human(${String(v)}, "${unit}") = "${got}" (expected "${want}")`);
}
// Whatever the magnitude, 3 significant digits never lose the integer part's zeros.
for (let e = -9; e <= 12; e++) {
  for (const m of [1, 1.99704, 2, 5.5, 9.99]) {
    const v = m * 10 ** e;
    const h = human(v, ""), f = fmt(v);
    const back = (s) => {
      const [num, pre] = s.split(" ");
      return Number(num.replace(/,/g, "")) * { K: 1e3, M: 1e6, G: 1e9, T: 1e12 }[pre || ""] || Number(num.replace(/,/g, ""));
    };
    const hOk = Math.abs(back(h) - v) <= Math.abs(v) * 0.006;
    const fOk = Math.abs(Number(f.replace(/,/g, "")) - v) <= Math.abs(v) * 0.0006;
    check(hOk && fOk, `${v.toExponential(5)}: human "${h}" and fmt "${f}" read back within their digits`);
  }
}
finish();
