'use strict';
// ONNX Runtime's side of the comparison with `minivit bench`, timed as bench times its own:
// evaluation throughput at one batch size (images/s over --runs batches after --warmup
// untimed ones) and batch-1 latency (median and 99th percentile over --latency-images single
// images after --latency-warmup untimed ones, cycling through different test images). One
// JSON line on stdout. Inputs are made before the clock starts: each figure is session.run()
// alone, including the binding's own cost per call, which --model floor.onnx measures.
// usage: node ort_time.js --ort PREFIX --dir EXPORT_DIR [--model model.onnx] [--threads 2]
//        [--batch 128] [--runs 200] [--warmup 10] [--latency-images 1000] [--latency-warmup 100]
const path = require('path');
const c = require('./ort_common');

const USAGE = 'node ort_time.js --ort PREFIX --dir EXPORT_DIR [--model FILE] [--threads N] '
  + '[--batch N] [--runs N] [--warmup N] [--latency-images N] [--latency-warmup N]';

// bench cycles its latency images the same way: enough different ones that no cache holds
// the answer, few enough to make up front.
const LATENCY_CYCLE = 64;
const BATCH_CYCLE = 8;

// As bench reports them: the middle value (the mean of the two middle ones for an even
// count), and the 99th percentile by nearest rank, the ceil(0.99 n)-th smallest.
function median(sorted) {
  const n = sorted.length;
  return n % 2 ? sorted[(n - 1) / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

function p99(sorted) {
  return sorted[Math.ceil(0.99 * sorted.length) - 1];
}

async function main() {
  const args = c.parseArgs(process.argv.slice(2), {
    ort: '', dir: '', model: 'model.onnx', threads: 2, batch: 128, runs: 200, warmup: 10,
    latency_images: 1000, latency_warmup: 100,
  }, USAGE);
  if (args.threads < 1 || args.batch < 1) c.die('--threads and --batch expect at least 1');
  const { ort, version } = c.loadOrt(args.ort);
  const manifest = c.readManifest(args.dir);
  const images = c.readImages(args.dir, manifest);
  const session = await c.openSession(ort, path.join(args.dir, args.model), args.threads);
  const input = session.inputNames[0];
  const result = { ort_version: version, model: args.model, threads: args.threads };

  if (args.runs > 0) {
    const feeds = c.batches(ort, images, manifest, args.batch, BATCH_CYCLE);
    for (let i = 0; i < args.warmup; i++) await session.run({ [input]: feeds[i % feeds.length] });
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < args.runs; i++) await session.run({ [input]: feeds[i % feeds.length] });
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    Object.assign(result, {
      batch_size: args.batch, runs: args.runs, warmup: args.warmup, eval_img_per_s: (args.runs * args.batch) / seconds,
      ms_per_batch: (seconds * 1e3) / args.runs,
    });
  }

  if (args.latency_images > 0) {
    const singles = c.batches(ort, images, manifest, 1, LATENCY_CYCLE);
    for (let i = 0; i < args.latency_warmup; i++) await session.run({ [input]: singles[i % singles.length] });
    const ms = new Float64Array(args.latency_images);
    for (let i = 0; i < args.latency_images; i++) {
      const t0 = process.hrtime.bigint();
      await session.run({ [input]: singles[i % singles.length] });
      ms[i] = Number(process.hrtime.bigint() - t0) / 1e6;
    }
    ms.sort();
    Object.assign(result, {
      latency_images: args.latency_images, latency_warmup: args.latency_warmup,
      latency_median_ms: median(ms),
      latency_p99_ms: p99(ms),
    });
  }
  console.log(JSON.stringify(result));
}

main().catch((e) => c.die(e.message.split('\n')[0]));
