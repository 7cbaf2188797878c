#!/usr/bin/env node
// The ONNX Runtime side of the export tests: runs each case of a JSON list on onnxruntime-node
// (CPU, one thread, sequential) and compares every output with nnfleet's, within `tol` of
// max(1, |nnfleet|). Prints one line per case and exits 1 when any case differs or fails.
//
//   node onnx_ort_check.js cases.json
//   cases.json: [{"onnx": "m.onnx", "inputs": {"name": "x.npy", ...},
//                 "outputs": {"name": "y.npy", ...}, "tol": 1e-5}, ...]
//
// onnxruntime-node is found through NODE_PATH (scripts/setup_ort.sh installs it).
'use strict';
const fs = require('fs');

// A little-endian float32 .npy (C order): its shape and data.
function readNpy(file) {
  const b = fs.readFileSync(file);
  if (b.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not an .npy file`);
  const major = b[6];
  const hlen = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + hlen;
  const header = b.toString('latin1', major === 1 ? 10 : 12, start);
  if (!header.includes("'descr': '<f4'") || header.includes("'fortran_order': True"))
    throw new Error(`${file}: expected little-endian float32 in C order, got ${header.trim()}`);
  const shape = header.match(/'shape': \(([^)]*)\)/)[1].split(',').filter((s) => s.trim() !== '')
                    .map(Number);
  const data = new Float32Array(b.buffer.slice(b.byteOffset + start, b.byteOffset + b.length));
  return {shape, data};
}

async function main() {
  const file = process.argv[2];
  if (!file) throw new Error('failed to parse the command line: expected cases.json');
  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (e) {
    throw new Error('failed to load onnxruntime-node: ' + e.message +
                    '\nhint: run scripts/setup_ort.sh BUILD and set NODE_PATH to its node_modules');
  }
  const cases = JSON.parse(fs.readFileSync(file, 'utf8'));
  let bad = 0;
  for (const c of cases) {
    try {
      const session = await ort.InferenceSession.create(c.onnx, {
        intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential'});
      const feeds = {};
      for (const [name, npy] of Object.entries(c.inputs)) {
        const a = readNpy(npy);
        feeds[name] = new ort.Tensor('float32', a.data, a.shape);
      }
      const got = await session.run(feeds);
      let worst = 0;
      for (const [name, npy] of Object.entries(c.outputs)) {
        const want = readNpy(npy);
        const g = got[name];
        if (!g) throw new Error(`no output '${name}'; the file has ${Object.keys(got).join(', ')}`);
        if (g.dims.join(',') !== want.shape.join(','))
          throw new Error(`output '${name}' has shape [${g.dims}]; expected [${want.shape}]`);
        for (let i = 0; i < want.data.length; i++) {
          const d = Math.abs(g.data[i] - want.data[i]) / Math.max(1, Math.abs(want.data[i]));
          if (!(d <= worst)) worst = Number.isNaN(d) ? Infinity : Math.max(worst, d);
        }
      }
      const ok = worst <= c.tol;
      if (!ok) bad++;
      console.log(`${ok ? 'ok' : 'DIFFERS'} ${c.onnx}: max relative difference ${worst.toExponential(2)}` +
                  ` (tolerance ${c.tol})`);
    } catch (e) {
      bad++;
      console.log(`FAILED ${c.onnx}: ${e.message}`);
    }
  }
  process.exit(bad ? 1 : 0);
}

main().catch((e) => {
  console.error(e.message);
  process.exit(2);
});
