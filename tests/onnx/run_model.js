// Runs an exported dqntrader model in onnxruntime (onnxruntime-node, the npm package) over the
// bars FROM .. TO of a CSV file, every bar with every incoming position, as one batch of rows:
// the Q-values and actions `dqntrader act` takes along its path are among them. A runtime
// dqntrader did not write; nothing here reads dqntrader's code or files other than the model
// and the CSV.
//
//   node run_model.js MODEL.onnx META.json BARS.csv FROM TO
//
// META.json: what tests/onnx/check_model.py prints of the model (its inputs' form, positions,
// warm-up, ofi window and extra columns). FROM and TO are bar indices (counted from 0 over the
// data rows). Prints one JSON object per bar and incoming position, one per line:
// {"bar", "incoming", "q", "action"} (incoming and action as positions' indices).
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

function readCsv(path) {
  const lines = fs.readFileSync(path, 'utf8').split(/\r?\n/).filter((l) => l.trim() !== '');
  const header = lines[0].split(',').map((s) => s.trim());
  const columns = {};
  header.forEach((name) => { columns[name] = []; });
  for (const line of lines.slice(1)) {
    const cells = line.split(',');
    header.forEach((name, i) => { columns[name].push(cells[i]); });
  }
  return columns;
}

async function main() {
  const [model, metaPath, csvPath, fromText, toText] = process.argv.slice(2);
  const meta = JSON.parse(fs.readFileSync(metaPath, 'utf8'));
  const bars = readCsv(csvPath);
  const close = bars.close.map(Number);
  const ofi = meta.ofi_window > 0 ? bars.ofi.map(Number) : null;
  const extra = meta.extra.map((name) => bars[name].map(Number));
  const W = meta.warmup, O = meta.ofi_window, E = extra.length, K = meta.positions.length;
  const exact = meta.form === 'float64';
  const Values = exact ? Float64Array : Float32Array;
  const type = exact ? 'float64' : 'float32';
  const from = Number(fromText), to = Number(toText);
  const rows = (to - from + 1) * K;
  const closes = new Values(rows * (W + 1)), low = new Float32Array(rows * (W + 1));
  const ofiRows = new Values(rows * O), extraRows = new Values(rows * E);
  const position = new Float32Array(rows * K);
  let row = 0;
  for (let t = from; t <= to; ++t) {
    for (let k = 0; k < K; ++k, ++row) {
      for (let i = 0; i <= W; ++i) {
        const c = close[t - W + i];
        closes[row * (W + 1) + i] = c;
        low[row * (W + 1) + i] = Math.fround(c - Math.fround(c));  // the double's rest
      }
      for (let i = 0; i < O; ++i) ofiRows[row * O + i] = ofi[t - O + 1 + i];
      for (let e = 0; e < E; ++e) extraRows[row * E + e] = extra[e][t];
      position[row * K + k] = 1;
    }
  }
  const feeds = {
    closes: new ort.Tensor(type, closes, [rows, W + 1]),
    position: new ort.Tensor('float32', position, [rows, K]),
  };
  if (!exact) feeds.closes_low = new ort.Tensor('float32', low, [rows, W + 1]);
  if (O > 0) feeds.ofi = new ort.Tensor(type, ofiRows, [rows, O]);
  if (E > 0) feeds.extra = new ort.Tensor(type, extraRows, [rows, E]);
  const session = await ort.InferenceSession.create(
      model, {intraOpNumThreads: 1, interOpNumThreads: 1, executionProviders: ['cpu']});
  const result = await session.run(feeds);
  const A = result.q.dims[1];
  const out = [];
  row = 0;
  for (let t = from; t <= to; ++t) {
    for (let k = 0; k < K; ++k, ++row) {
      const q = Array.from(result.q.data.slice(row * A, (row + 1) * A));
      out.push(JSON.stringify({bar: t, incoming: k, q: q, action: Number(result.action.data[row])}));
    }
  }
  process.stdout.write(out.join('\n') + '\n');
}

main().catch((error) => { console.error('run_model.js: ' + error.message); process.exit(2); });
