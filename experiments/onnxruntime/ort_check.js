'use strict';
// The whole test split through the exported model in ONNX Runtime: its top-1, and how far its
// logits of the first images are from torch's (the manifest's). One JSON line on stdout.
// usage: node ort_check.js --ort PREFIX --dir EXPORT_DIR [--threads 2] [--batch 128]
const path = require('path');
const c = require('./ort_common');

const USAGE = 'node ort_check.js --ort PREFIX --dir EXPORT_DIR [--threads N] [--batch N]';

async function main() {
  const args = c.parseArgs(process.argv.slice(2), { ort: '', dir: '', threads: 2, batch: 128 }, USAGE);
  if (args.batch < 1) c.die('--batch expects at least 1');
  const { ort, version } = c.loadOrt(args.ort);
  const manifest = c.readManifest(args.dir);
  const images = c.readImages(args.dir, manifest);
  const labels = c.readLabels(args.dir, manifest);
  const session = await c.openSession(ort, path.join(args.dir, manifest.model), args.threads);
  const per = manifest.shape.reduce((a, b) => a * b, 1);
  const K = manifest.num_classes;
  const probe = manifest.probe_logits;
  let correct = 0;
  let maxDiff = 0;
  for (let start = 0; start < manifest.count; start += args.batch) {
    const n = Math.min(args.batch, manifest.count - start);
    const input = new ort.Tensor('float32', images.subarray(start * per, (start + n) * per),
      [n, ...manifest.shape]);
    const logits = (await session.run({ [session.inputNames[0]]: input }))[session.outputNames[0]];
    if (logits.dims.length !== 2 || logits.dims[0] !== n || logits.dims[1] !== K) {
      c.die(`the model returned logits of shape [${logits.dims}], expected [${n}, ${K}]`);
    }
    for (let i = 0; i < n; i++) {
      const row = logits.data.subarray(i * K, (i + 1) * K);
      // The first largest wins a tie, as an argmax over the row in order does.
      let best = 0;
      for (let k = 1; k < K; k++) if (row[k] > row[best]) best = k;
      if (best === labels[start + i]) correct++;
      if (start + i < probe.length) {
        for (let k = 0; k < K; k++) maxDiff = Math.max(maxDiff, Math.abs(row[k] - probe[start + i][k]));
      }
    }
  }
  console.log(JSON.stringify({
    ort_version: version, threads: args.threads, count: manifest.count, correct,
    top1: correct / manifest.count, probe_images: probe.length, probe_max_abs_diff: maxDiff,
  }));
}

main().catch((e) => c.die(e.message.split('\n')[0]));
