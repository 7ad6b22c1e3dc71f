// The reference: Hugging Face's own `tokenizers` (Rust, through its Node binding
// @anush008/tokenizers) encodes and decodes every text of a corpus.
// Usage: node encode.cjs TOKENIZER_JSON CORPUS_JSONL OUT_JSONL
// Each corpus line is a JSON string; each output line is
// {"ids": [...], "plain": [...], "text": "..."}: ids with special tokens added, ids without, and
// the decoding of `ids` (special tokens kept).
const fs = require('fs');
const { Tokenizer } = require('@anush008/tokenizers');

async function main() {
  const [tokenizerPath, corpusPath, outPath] = process.argv.slice(2);
  const tokenizer = Tokenizer.fromFile(tokenizerPath);
  const lines = fs.readFileSync(corpusPath, 'utf8').split('\n').filter((l) => l.length > 0);
  const out = [];
  for (const line of lines) {
    const text = JSON.parse(line);
    const ids = (await tokenizer.encode(text, null, { addSpecialTokens: true })).getIds();
    const plain = (await tokenizer.encode(text, null, { addSpecialTokens: false })).getIds();
    const decoded = await tokenizer.decode(Array.from(ids), false);
    out.push(JSON.stringify({ ids: Array.from(ids), plain: Array.from(plain), text: decoded }));
  }
  fs.writeFileSync(outPath, out.join('\n') + '\n');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
