// Times Hugging Face's tokenizers (Rust, via @anush008/tokenizers) encoding every document of a
// JSONL file, one at a time, after one warm-up pass. Prints {"seconds": s, "tokens": n}.
// Usage: node reference_encode.cjs TOKENIZER_JSON DOCS_JSONL
const fs = require('fs');
const { Tokenizer } = require('@anush008/tokenizers');

async function pass(tokenizer, docs) {
  let tokens = 0;
  for (const d of docs) {
    tokens += (await tokenizer.encode(d, null, { addSpecialTokens: false })).getIds().length;
  }
  return tokens;
}

async function main() {
  const [path, docsPath] = process.argv.slice(2);
  const tokenizer = Tokenizer.fromFile(path);
  const docs = fs.readFileSync(docsPath, 'utf8').split('\n').filter((l) => l).map(JSON.parse);
  await pass(tokenizer, docs);
  const start = process.hrtime.bigint();
  const tokens = await pass(tokenizer, docs);
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  console.log(JSON.stringify({ seconds, tokens }));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
