// The official OpenAI Node SDK against kvgate: every call a client of an OpenAI-compatible server
// makes, through the gateway to a mock worker. Usage: node openai_sdk.cjs BASE_URL API_KEY MODEL
// [generations|engine] (with NODE_PATH naming the node_modules that holds `openai`; `generations`:
// only completions, chat and streamed chat with usage, what a prefill/decode fleet serves;
// `engine`: an engine itself, the mock, without models.retrieve). Prints one line per step and
// exits non-zero at the first that fails.
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

  if (only !== 'engine') {  // vLLM serves the list, not one model
    const one = await client.models.retrieve(model);
    check(one.id === model, 'models.retrieve returns the model');
    console.log('ok models.retrieve');
  }

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

  // Unless told otherwise the SDK asks for base64 and decodes it: the same vectors as floats.
  const asked = await client.embeddings.create({ model, input: 'one text' });
  const floats = await client.embeddings.create({ model, input: 'one text', encoding_format: 'float' });
  const a = Array.from(asked.data[0].embedding);
  const f = floats.data[0].embedding;
  check(a.length === f.length && a.length > 0, 'base64 embedding length ' + a.length + ' vs ' + f.length);
  check(a.every((x, i) => Math.abs(x - f[i]) < 1e-6), 'base64 embedding values ' + a + ' vs ' + f);
  check(f.some((x) => x !== 0), 'a non-zero embedding');
  console.log('ok embeddings base64');

  // The SDK's stream helper accumulates the events into the response: every event in order.
  const rs = client.responses.stream({ model, input: 'a streamed responses call', max_output_tokens: 5 });
  const numbers = [];
  let deltas = '';
  for await (const event of rs) {
    numbers.push(event.sequence_number);
    if (event.type === 'response.output_text.delta') deltas += event.delta;
  }
  const final = await rs.finalResponse();
  check(numbers.every((n, i) => n === i), 'sequence numbers 0, 1, 2...: ' + numbers);
  check(deltas.length > 0 && final.output_text === deltas, 'streamed text ' + JSON.stringify(deltas) +
        ' vs final ' + JSON.stringify(final.output_text));
  check(final.status === 'incomplete' && final.usage.output_tokens === 5, 'final status and usage');
  console.log('ok responses.stream');
  if (only === 'engine') return;  // the mock answers any model name

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
