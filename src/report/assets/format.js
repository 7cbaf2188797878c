// The report's number formatting, apart from the page so that node can test it
// (tests/report/format_test.mjs): inlined into the page before report.js, where it defines
// nnfleetFormat; under node, require() returns the same object.
"use strict";
var nnfleetFormat = (function () {
  // Significant digits, in en-US (a comma every three digits), never in exponent form.
  const grouped = new Map();
  function group(v, digits) {
    if (!grouped.has(digits)) grouped.set(digits, new Intl.NumberFormat("en-US", { maximumSignificantDigits: digits }));
    return grouped.get(digits).format(v);
  }
  // The mantissa of an exponent form without trailing zeros: 1.500e-9 -> 1.5e-9. Only zeros after
  // a decimal point go: the "200" of 199.7 rounded stays 200 (stripping every trailing zero once
  // turned 199,704 samples/s into "2 K").
  function exponent(v, digits) {
    const [mant, exp] = v.toExponential(Math.max(digits - 1, 0)).split("e");
    const m = mant.includes(".") ? mant.replace(/0+$/, "").replace(/\.$/, "") : mant;
    return m + "e" + exp;
  }
  // A value for a table cell: integers whole (199,704), other numbers to `digits` significant
  // digits (4 unless told), in exponent form below 0.001 and from a million on; text as it is.
  function fmt(v, digits) {
    if (v === null || v === undefined || v === "") return "";
    if (typeof v !== "number") return String(v);
    if (!isFinite(v)) return String(v);
    if (v === 0) return "0"; // -0 too
    if (Number.isInteger(v) && Math.abs(v) < 1e15) return v.toLocaleString("en-US");
    const a = Math.abs(v), d = digits || 4;
    if (a < 1e-3 || a >= 1e6) return exponent(v, d);
    return group(v, d);
  }
  // A magnitude in thousands (K, M, G, T) with 3 significant digits: 199,704 -> "200 K", and a
  // figure that rounds up to 1,000 of its unit moves to the next one (999,999 -> "1 M").
  const prefixes = ["", "K", "M", "G", "T"];
  function human(v, unit) {
    if (v === null || v === undefined || v === "") return "";
    if (typeof v !== "number") return String(v);
    if (!isFinite(v)) return String(v);
    unit = unit || "";
    let i = 0;
    let m = v;
    while (i < prefixes.length - 1 && Math.abs(Number(m.toPrecision(3))) >= 1000) {
      m /= 1000;
      i++;
    }
    const text = Math.abs(m) < 1e-3 && m !== 0 ? exponent(m, 3) : group(m, 3);
    const suffix = prefixes[i] + unit;
    return suffix ? text + " " + suffix : text;
  }
  return { fmt, human };
})();
if (typeof module !== "undefined" && module.exports) module.exports = nnfleetFormat;
