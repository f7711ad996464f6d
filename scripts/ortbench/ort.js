// Runs ONNX Runtime (onnxruntime-node, CPU) for scripts/ortbench/run.
//
//   node ort.js ORT_DIR probs MODEL.onnx IN.f32 OUT.f32
//       writes the softmax of the model's logits for the images of IN.f32
//       (3x32x32 little-endian float32 each) to OUT.f32
//   node ort.js ORT_DIR time MODEL.onnx BATCH THREADS MIN_SECONDS WARMUP
//       times session.run on a fixed random batch and prints one JSON line:
//       {"impl":"ort", "img_per_s", "ms_per_batch", "ms_per_batch_min",
//        "cpu_ms_per_batch", "steps", ...}
//
// The images feed the model's first input, whatever its name (export.py's
// "x", or cmd/export's). Sessions use all graph optimisations,
// intraOpNumThreads = THREADS (1 for probs) and one inter-op thread,
// sequential execution.
"use strict";
const fs = require("fs");
const path = require("path");

function softmaxRows(logits, k) {
  const out = new Float32Array(logits.length);
  for (let r = 0; r < logits.length / k; r++) {
    let hi = -Infinity;
    for (let j = 0; j < k; j++) hi = Math.max(hi, logits[r * k + j]);
    let s = 0;
    for (let j = 0; j < k; j++) s += Math.exp(logits[r * k + j] - hi);
    for (let j = 0; j < k; j++) out[r * k + j] = Math.exp(logits[r * k + j] - hi) / s;
  }
  return out;
}

async function session(ort, model, threads) {
  return ort.InferenceSession.create(model, {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: "sequential",
    graphOptimizationLevel: "all",
  });
}

async function main() {
  const [dir, mode, model, ...rest] = process.argv.slice(2);
  const ort = require(path.join(dir, "node_modules", "onnxruntime-node"));
  if (mode === "probs") {
    const [inPath, outPath] = rest;
    const buf = fs.readFileSync(inPath);
    const x = new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4);
    const s = await session(ort, model, 1);
    const out = await s.run({ [s.inputNames[0]]: new ort.Tensor("float32", Float32Array.from(x), [x.length / 3072, 3, 32, 32]) });
    const logits = out.logits;
    const p = softmaxRows(logits.data, logits.dims[1]);
    fs.writeFileSync(outPath, Buffer.from(p.buffer));
    return;
  }
  if (mode !== "time") throw new Error(`unknown mode ${mode}`);
  const batch = Number(rest[0]), threads = Number(rest[1]), minSec = Number(rest[2]), warmup = Number(rest[3] || 3);
  const s = await session(ort, model, threads);
  // Standard normal inputs (Box-Muller), fixed seed.
  let seed = 1;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) + 0.5) / 2147483648;
  const x = new Float32Array(batch * 3072);
  for (let i = 0; i < x.length; i++) x[i] = Math.sqrt(-2 * Math.log(rnd())) * Math.cos(2 * Math.PI * rnd());
  const feeds = { [s.inputNames[0]]: new ort.Tensor("float32", x, [batch, 3, 32, 32]) };
  for (let i = 0; i < warmup; i++) await s.run(feeds);
  let steps = 0, fastest = Infinity;
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  let elapsed = 0;
  while (steps < 3 || elapsed < minSec) {
    const a = process.hrtime.bigint();
    await s.run(feeds);
    const b = process.hrtime.bigint();
    fastest = Math.min(fastest, Number(b - a) / 1e6);
    steps++;
    elapsed = Number(b - t0) / 1e9;
  }
  const cpu = process.cpuUsage(cpu0);
  const r3 = (v) => Math.round(v * 1000) / 1000;
  process.stdout.write(JSON.stringify({
    impl: "ort", version: ort.env.versions ? ort.env.versions.common : undefined, model: path.basename(model, ".onnx"),
    batch, threads, img_per_s: Math.round((batch * steps / elapsed) * 100) / 100,
    ms_per_batch: r3((elapsed * 1000) / steps), ms_per_batch_min: r3(fastest),
    cpu_ms_per_batch: r3((cpu.user + cpu.system) / 1000 / steps), steps, warmup,
  }) + "\n");
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + "\n");
  process.exit(1);
});
