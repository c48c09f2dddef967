// The official openai npm package against the live /v1 API: each call's result as JSON on
// stdout, for tests/openai/test_node_sdk_live.py to check against the saved runs.
import OpenAI from "openai";

const client = new OpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY,
                            maxRetries: 0, timeout: 60_000 });
const messages = [{ role: "user", content: "What does a for loop do?" }];
const out = {};

const chat = await client.chat.completions.create({ model: "flagship", messages, max_tokens: 20, seed: 3,
                                                    presence_penalty: 0.5, top_k: 8 });
out.chat = { id: chat.id, object: chat.object, text: chat.choices[0].message.content, usage: chat.usage };

const stream = await client.chat.completions.create({ model: "flagship", messages, max_tokens: 20, stream: true,
                                                      stream_options: { include_usage: true } });
const chunks = [];
for await (const chunk of stream) chunks.push(chunk);
out.chat_stream = { ids: [...new Set(chunks.map((c) => c.id))],
                    text: chunks.map((c) => c.choices[0]?.delta?.content ?? "").join(""),
                    usage: chunks.at(-1).usage };

const key = { headers: { "Idempotency-Key": "node-retry-1" } };
const first = await client.chat.completions.create({ model: "flagship", messages, max_tokens: 12 }, key);
const again = await client.chat.completions.create({ model: "flagship", messages, max_tokens: 12 }, key);
out.retry = { first: first.id, again: again.id, same_text: first.choices[0].message.content ===
              again.choices[0].message.content };

const { data: text, response } = await client.completions
  .create({ model: "flagship", prompt: "def add(a, b):", max_tokens: 10 }).withResponse();
out.text = { id: text.id, object: text.object, text: text.choices[0].text,
             remaining_requests: response.headers.get("x-ratelimit-remaining-requests") };

const textChunks = [];
for await (const c of await client.completions.create({ model: "flagship", prompt: "Once upon", max_tokens: 10,
                                                        stream: true })) textChunks.push(c);
out.text_stream = { ids: [...new Set(textChunks.map((c) => c.id))],
                    text: textChunks.map((c) => c.choices[0]?.text ?? "").join(""),
                    finish: textChunks.map((c) => c.choices[0]?.finish_reason).filter(Boolean) };

try {
  await client.chat.completions.create({ model: "flagship", messages, logit_bias: { 5: 101 } });
  out.refused = null;
} catch (err) {
  out.refused = { status: err.status, param: err.param, code: err.code, type: err.type };
}
console.log(JSON.stringify(out));
