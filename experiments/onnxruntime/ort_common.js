'use strict';
// What ort_check.js and ort_time.js share: the arguments, onnxruntime-node from the work
// folder's node_modules, the files export_onnx.py wrote, and the session options.
const fs = require('fs');
const os = require('os');
const path = require('path');

function die(message) {
  process.stderr.write(`error: ${message}\n`);
  process.exit(2);
}

// --name value pairs into an object of the given defaults' types; anything else is an error.
function parseArgs(argv, defaults, usage) {
  const args = { ...defaults };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].startsWith('--') ? argv[i].slice(2).replace(/-/g, '_') : null;
    if (key === null || !(key in defaults) || i + 1 >= argv.length) {
      die(`unexpected argument ${JSON.stringify(argv[i])}; usage: ${usage}`);
    }
    const value = argv[i + 1];
    if (typeof defaults[key] === 'number') {
      const n = Number(value);
      if (!Number.isInteger(n) || n < 0) die(`--${argv[i].slice(2)} expects a whole number >= 0, got ${JSON.stringify(value)}`);
      args[key] = n;
    } else {
      args[key] = value;
    }
  }
  for (const [key, value] of Object.entries(args)) {
    if (value === '') die(`--${key.replace(/_/g, '-')} is required; usage: ${usage}`);
  }
  return args;
}

function loadOrt(prefix) {
  const dir = path.resolve(prefix, 'node_modules', 'onnxruntime-node');
  let ort;
  let version;
  try {
    ort = require(dir);
    version = require(path.join(dir, 'package.json')).version;
  } catch (e) {
    die(`cannot load onnxruntime-node from ${dir} (npm install it there first): ${e.message.split('\n')[0]}`);
  }
  return { ort, version };
}

function readManifest(dir) {
  const file = path.join(dir, 'manifest.json');
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    return die(`${file}: expected the manifest export_onnx.py writes: ${e.message}`);
  }
}

// The test images as one Float32Array, [count, C, H, W]; the file is little-endian like
// every host these scripts run on, which is checked rather than assumed.
function readImages(dir, manifest) {
  if (os.endianness() !== 'LE') die('this host is big-endian; the image file is little-endian float32');
  const file = path.join(dir, manifest.images);
  const per = manifest.shape.reduce((a, b) => a * b, 1);
  const buf = fs.readFileSync(file);
  if (buf.length !== manifest.count * per * 4) {
    die(`${file}: ${buf.length} bytes, expected ${manifest.count} x ${per} float32`);
  }
  // A view needs 4-byte alignment; copy in the rare case the buffer lacks it.
  const aligned = buf.byteOffset % 4 === 0 ? buf : Buffer.from(buf);
  return new Float32Array(aligned.buffer, aligned.byteOffset, aligned.length / 4);
}

function readLabels(dir, manifest) {
  const file = path.join(dir, manifest.labels);
  const buf = fs.readFileSync(file);
  if (buf.length !== manifest.count) die(`${file}: ${buf.length} labels, expected ${manifest.count}`);
  return buf;
}

async function openSession(ort, file, threads) {
  try {
    return await ort.InferenceSession.create(file, {
      executionProviders: ['cpu'],
      graphOptimizationLevel: 'all',
      intraOpNumThreads: threads,
      // One graph, one chain of operators: no second pool competing for the same cores.
      interOpNumThreads: 1,
      executionMode: 'sequential',
      logSeverityLevel: 3,
    });
  } catch (e) {
    return die(`${file}: onnxruntime cannot load it: ${e.message.split('\n')[0]}`);
  }
}

// Tensors over consecutive slices of the images, made once, so that timing sees run() alone.
function batches(ort, images, manifest, batch, count) {
  const per = manifest.shape.reduce((a, b) => a * b, 1);
  const available = Math.floor(manifest.count / batch);
  if (available < 1) die(`batch ${batch} is larger than the ${manifest.count} test images`);
  const out = [];
  for (let i = 0; i < Math.min(count, available); i++) {
    const data = images.subarray(i * batch * per, (i + 1) * batch * per);
    out.push(new ort.Tensor('float32', data, [batch, ...manifest.shape]));
  }
  return out;
}

module.exports = { die, parseArgs, loadOrt, readManifest, readImages, readLabels, openSession, batches };
