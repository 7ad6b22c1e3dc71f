// The OpenAI Node SDK against a key limited to one request a minute (--api-keys-file): the second
// call must raise the SDK's own RateLimitError, with the headers OpenAI sends and the SDK reads.
// Usage: node openai_ratelimit.cjs BASE_URL KEY MODEL
'use strict';
const OpenAI = require('openai');

const [baseURL, apiKey, model] = process.argv.slice(2);

function check(cond, what) {
  if (!cond) throw new Error(what);
}

async function main() {
  // No retries: the SDK would otherwise wait out Retry-After and try again.
  const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
  await client.completions.create({ model, prompt: 'hello', max_tokens: 2 });
  console.log('ok first call');
  try {
    await client.completions.create({ model, prompt: 'hello', max_tokens: 2 });
    check(false, 'the second call within the minute is refused');
  } catch (e) {
    check(e instanceof OpenAI.RateLimitError, 'RateLimitError, got ' + e);
    check(e.status === 429, 'status 429, got ' + e.status);
    const h = (name) => (typeof e.headers.get === 'function' ? e.headers.get(name) : e.headers[name]);
    check(h('x-ratelimit-limit-requests') === '1', 'limit-requests 1: ' + h('x-ratelimit-limit-requests'));
    check(h('x-ratelimit-remaining-requests') === '0', 'remaining 0: ' + h('x-ratelimit-remaining-requests'));
    check(/^(\d+ms|\d+s|\d+m\d+s)$/.test(h('x-ratelimit-reset-requests') || ''),
          'reset as OpenAI writes it: ' + h('x-ratelimit-reset-requests'));
    check(/^\d+$/.test(h('retry-after') || ''), 'retry-after in seconds: ' + h('retry-after'));
    check(/Rate limit reached/.test(e.message), 'the message says why: ' + e.message);
  }
  console.log('ok ratelimit');
}

main().then(
  () => console.log('all ok'),
  (e) => {
    console.error('FAILED: ' + (e && e.stack ? e.stack : e));
    process.exit(1);
  },
);
