#!/usr/bin/env node
// The W2 peer with ONNX Runtime (npm onnxruntime-node, CPU): m7 exported by export_m7_onnx.py,
// single-threaded (intraOpNumThreads 1, interOpNumThreads 1, sequential execution, all graph
// optimizations), predicts Fashion-MNIST's training images and the per-sample categorical
// cross-entropy (-log max(p[y], 1e-7), Keras's clipping) at each batch size asked, and prints one
// JSON line.
//
//   node ort_predict.js --model m7.onnx [--batch 1,256] [--limit B=N ...] [--fmnist-dir D]
//
// The launcher pins the process to one core (taskset). onnxruntime-node is found through
// NODE_PATH (bench/setup_peers.sh installs it under build/bench-node/node_modules). Timed per
// batch size: the loop over the images (input copy, session.run, loss), after one warm-up batch;
// load_seconds is InferenceSession.create.
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');

function parseArgs(argv) {
  const a = {batch: '1,256', limit: {}, fmnistDir: '/usr/share/datasets/fashion-mnist'};
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = argv[i + 1];
    if (v === undefined) throw new Error(`failed to parse ${k}: expected a value after it`);
    if (k === '--model') a.model = v;
    else if (k === '--batch') a.batch = v;
    else if (k === '--fmnist-dir') a.fmnistDir = v;
    else if (k === '--limit') {
      const [b, n] = v.split('=').map(Number);
      a.limit[b] = n;
    } else {
      throw new Error(`unknown option '${k}'; expected --model, --batch, --limit, --fmnist-dir`);
    }
    i++;
  }
  if (!a.model) throw new Error('failed to parse the command line: expected --model m7.onnx');
  return a;
}

function readIdx(file, header) {
  return zlib.gunzipSync(fs.readFileSync(file)).subarray(header);
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (e) {
    throw new Error('failed to load onnxruntime-node: ' + e.message +
                    '\nhint: run bench/setup_peers.sh and set NODE_PATH to its node_modules');
  }
  const images = readIdx(path.join(a.fmnistDir, 'train-images-idx3-ubyte.gz'), 16);
  const labels = readIdx(path.join(a.fmnistDir, 'train-labels-idx1-ubyte.gz'), 8);
  const n = labels.length;
  const x = new Float32Array(n * 784);
  for (let i = 0; i < x.length; i++) x[i] = images[i] * (1 / 255);

  let t = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(a.model, {
    intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all'});
  const loadSeconds = Number(process.hrtime.bigint() - t) / 1e9;

  const out = {load_seconds: loadSeconds, version: ort.env.versions, batches: {}};
  for (const b of a.batch.split(',').map(Number)) {
    const count = Math.min(a.limit[b] ?? n, n);
    const pred = new Float32Array(count * 10);
    const loss = new Float32Array(count);
    const run = async (i, m) => {
      const input = new ort.Tensor('float32', x.slice(i * 784, (i + m) * 784), [m, 1, 28, 28]);
      return (await session.run({x: input})).p.data;
    };
    await run(0, Math.min(b, count));  // warm-up
    t = process.hrtime.bigint();
    for (let i = 0; i < count; i += b) {
      const m = Math.min(b, count - i);
      const p = await run(i, m);
      pred.set(p, i * 10);
      for (let j = 0; j < m; j++) {
        loss[i + j] = -Math.log(Math.max(p[j * 10 + labels[i + j]], 1e-7));
      }
    }
    const seconds = Number(process.hrtime.bigint() - t) / 1e9;
    let correct = 0;
    let sum = 0;
    for (let i = 0; i < count; i++) {
      let best = 0;
      for (let c = 1; c < 10; c++) if (pred[i * 10 + c] > pred[i * 10 + best]) best = c;
      correct += best === labels[i];
      sum += loss[i];
    }
    out.batches[String(b)] = {samples: count, seconds, samples_per_second: count / seconds,
                              mean_loss: sum / count, accuracy: correct / count};
  }
  out.peak_rss_bytes = process.resourceUsage().maxRSS * 1024;
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error('ort_predict.js: ' + e.message);
  process.exit(1);
});
