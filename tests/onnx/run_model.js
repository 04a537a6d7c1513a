// Runs an exported dqntrader model in onnxruntime (onnxruntime-node, the npm package), over a
// window of bars of a CSV file, carrying the position from one decision to the next: the
// decisions `dqntrader act --from --to --json` prints, taken by a runtime dqntrader did not
// write. Nothing here reads dqntrader's code or files other than the model and the CSV.
//
//   node run_model.js MODEL.onnx META.json BARS.csv FROM TO POSITION
//
// META.json: what tests/onnx/check_model.py prints of the model (its positions, warm-up, ofi
// window and extra columns). FROM and TO are bar indices (counted from 0 over the data rows);
// POSITION the position held before FROM. Prints one JSON object per decision, one per line:
// {"bar", "q", "action", "position"}.
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
  const [model, metaPath, csvPath, fromText, toText, positionText] = process.argv.slice(2);
  const meta = JSON.parse(fs.readFileSync(metaPath, 'utf8'));
  const bars = readCsv(csvPath);
  const close = bars.close.map(Number);
  const ofi = meta.ofi_window > 0 ? bars.ofi.map(Number) : null;
  const extra = meta.extra.map((name) => bars[name].map(Number));
  const positions = meta.positions;
  const W = meta.warmup, O = meta.ofi_window, K = positions.length;
  const session = await ort.InferenceSession.create(
      model, {intraOpNumThreads: 1, interOpNumThreads: 1, executionProviders: ['cpu']});
  let held = positions.indexOf(Number(positionText));
  if (held < 0) throw new Error('position ' + positionText + ' is not one of ' + positions);
  const out = [];
  for (let t = Number(fromText); t <= Number(toText); ++t) {
    const feeds = {
      closes: new ort.Tensor('float64', Float64Array.from(close.slice(t - W, t + 1)), [W + 1]),
      position: new ort.Tensor('float32', Float32Array.from(positions, (_, i) => i === held ? 1 : 0), [K]),
    };
    if (O > 0) feeds.ofi = new ort.Tensor('float64', Float64Array.from(ofi.slice(t - O + 1, t + 1)), [O]);
    if (extra.length > 0)
      feeds.extra = new ort.Tensor('float64', Float64Array.from(extra, (column) => column[t]), [extra.length]);
    const result = await session.run(feeds);
    const action = Number(result.action.data[0]);
    out.push(JSON.stringify({bar: t, q: Array.from(result.q.data), action: action, position: positions[action]}));
    held = action;
  }
  process.stdout.write(out.join('\n') + '\n');
}

main().catch((error) => { console.error('run_model.js: ' + error.message); process.exit(2); });
