// Runs ONNX models with ONNX Runtime for the tests of nn/onnx.
//
//   node run.js ORT_DIR < jobs.json > results.json
//
// ORT_DIR is the folder scripts/ort/install prints. jobs.json is
// {"jobs": [{"model": PATH, "inputs": {NAME: {"type": "float32"|"int64",
// "dims": [...], "data": [...]}}}]}; results.json is {"results":
// [{"outputs": {NAME: {"dims": [...], "data": [...]}}}]}, one entry a job,
// float32 outputs as JSON numbers (exact: every float32 is a double).
// Errors go to stderr with exit status 1.
"use strict";
const path = require("path");

async function main() {
  const ort = require(path.join(process.argv[2], "node_modules", "onnxruntime-node"));
  let text = "";
  process.stdin.setEncoding("utf8");
  for await (const chunk of process.stdin) text += chunk;
  const { jobs } = JSON.parse(text);
  const results = [];
  for (const job of jobs) {
    const session = await ort.InferenceSession.create(job.model, {
      intraOpNumThreads: 1,
      interOpNumThreads: 1,
    });
    const feeds = {};
    for (const [name, t] of Object.entries(job.inputs)) {
      const data =
        t.type === "int64"
          ? BigInt64Array.from(t.data, (v) => BigInt(v))
          : Float32Array.from(t.data);
      feeds[name] = new ort.Tensor(t.type, data, t.dims);
    }
    const out = await session.run(feeds);
    const outputs = {};
    for (const [name, t] of Object.entries(out)) {
      outputs[name] = { dims: t.dims, data: Array.from(t.data, Number) };
    }
    results.push({ outputs });
    await session.release();
  }
  process.stdout.write(JSON.stringify({ results }));
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + "\n");
  process.exit(1);
});
