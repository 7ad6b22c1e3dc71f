// The official OpenAI Node SDK against kvgate: every call a client of an OpenAI-compatible server
// makes, through the gateway to a mock worker. Usage: node openai_sdk.cjs BASE_URL API_KEY MODEL
// [generations] (with NODE_PATH naming the node_modules that holds `openai`; `generations`: only
// completions, chat and streamed chat with usage, what a prefill/decode fleet serves). Prints one
// line per step and exits non-zero at the first that fails.
const OpenAI = require('openai');

const [baseURL, apiKey, model, only] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 20000 });

function check(cond, what) {
  if (!cond) throw new Error('check failed: ' + what);
}

async function main() {
  const listed = await client.models.list();
  check(listed.data.some((m) => m.id === model), 'models.list names the model');
  console.log('ok models.list');

  const one = await client.models.retrieve(model);
  check(one.id === model, 'models.retrieve returns the model');
  console.log('ok models.retrieve');

  const completion = await client.completions.create({ model, prompt: 'hello from the sdk', max_tokens: 4 });
  check(completion.choices.length === 1 && completion.choices[0].text.length > 0, 'completion text');
  check(completion.usage.prompt_tokens > 0, 'completion usage');
  console.log('ok completions.create');

  const chat = await client.chat.completions.create({
    model,
    messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }],
    max_tokens: 4,
  });
  check(chat.choices[0].message.role === 'assistant', 'chat answer role');
  check(chat.choices[0].message.content.length > 0, 'chat answer content');
  console.log('ok chat.completions.create');

  const stream = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'stream to me' }],
    max_tokens: 5,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.choices.length > 0) text += chunk.choices[0].delta.content || '';
    if (chunk.usage) usage = chunk.usage;
  }
  check(text.length > 0, 'streamed content');
  check(usage && usage.completion_tokens === 5, 'streamed usage');
  console.log('ok chat.completions.create stream');
  if (only === 'generations') return;

  const emb = await client.embeddings.create({ model, input: ['one text', 'another'] });
  check(emb.data.length === 2 && emb.data[0].embedding.length > 0, 'embeddings');
  console.log('ok embeddings.create');

  const resp = await client.responses.create({ model, input: 'a responses call', max_output_tokens: 3 });
  check(resp.output_text.length > 0, 'responses output_text');
  console.log('ok responses.create');

  try {
    await client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] });
    check(false, 'an unknown model is refused');
  } catch (e) {
    check(e instanceof OpenAI.NotFoundError, 'NotFoundError, got ' + e);
    check(/no-such-model/.test(e.message), 'the error names the model: ' + e.message);
  }
  try {
    await client.completions.create({ model, max_tokens: 2 });
    check(false, 'a missing prompt is refused');
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError, 'BadRequestError, got ' + e);
  }
  const wrongKey = new OpenAI({ baseURL, apiKey: 'sk-wrong', maxRetries: 0 });
  try {
    await wrongKey.models.list();
    check(false, 'a wrong key is refused');
  } catch (e) {
    check(e instanceof OpenAI.AuthenticationError, 'AuthenticationError, got ' + e);
  }
  console.log('ok errors');
}

main().then(
  () => console.log('all ok'),
  (e) => {
    console.error('FAILED: ' + (e && e.stack ? e.stack : e));
    process.exit(1);
  },
);
