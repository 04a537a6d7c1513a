// The peer of `dqntrader act --follow --data -` for bench/act_latency.py: the same decision
// through onnxruntime (onnxruntime-node) on the model `dqntrader export --onnx` wrote, with
// the same protocol: CSV rows on standard input (a header first), one JSON line per row once
// the warm-up's bars are in, the position carried.
//
//   NODE_PATH=DIR/node/node_modules node onnx_follow.js MODEL.onnx META.json
//
// META.json: what tests/onnx/check_model.py prints of the model.
'use strict';
const fs = require('fs');
const readline = require('readline');
const ort = require('onnxruntime-node');

async function main() {
  const [model, metaPath] = process.argv.slice(2);
  const meta = JSON.parse(fs.readFileSync(metaPath, 'utf8'));
  const W = meta.warmup, O = meta.ofi_window, K = meta.positions.length, E = meta.extra.length;
  const session = await ort.InferenceSession.create(
      model, {intraOpNumThreads: 1, interOpNumThreads: 1, executionProviders: ['cpu']});
  const closes = [], ofi = [], extra = [];
  let header = null, held = meta.positions.indexOf(0), bar = 0;
  const lines = readline.createInterface({input: process.stdin, crlfDelay: Infinity});
  for await (const line of lines) {
    if (line.trim() === '') continue;
    const cells = line.split(',');
    if (header === null) {
      header = {};
      cells.forEach((name, i) => { header[name.trim()] = i; });
      continue;
    }
    closes.push(Number(cells[header.close]));
    if (O > 0) ofi.push(Number(cells[header.ofi]));
    extra.push(meta.extra.map((name) => Number(cells[header[name]])));
    if (closes.length > W + 1) { closes.shift(); ofi.shift(); extra.shift(); }
    ++bar;
    if (closes.length < W + 1) continue;
    const feeds = {
      closes: new ort.Tensor('float64', Float64Array.from(closes), [W + 1]),
      position: new ort.Tensor('float32', Float32Array.from({length: K}, (_, i) => i === held ? 1 : 0), [K]),
    };
    if (O > 0) feeds.ofi = new ort.Tensor('float64', Float64Array.from(ofi.slice(-O)), [O]);
    if (E > 0) feeds.extra = new ort.Tensor('float64', Float64Array.from(extra[extra.length - 1]), [E]);
    const result = await session.run(feeds);
    held = Number(result.action.data[0]);
    process.stdout.write(JSON.stringify({bar: bar - 1, q: Array.from(result.q.data), action: held,
                                         position: meta.positions[held]}) + '\n');
  }
}

main().catch((error) => { console.error('onnx_follow.js: ' + error.message); process.exit(2); });
