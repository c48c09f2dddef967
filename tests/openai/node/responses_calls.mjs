// Driven by tests/openai/test_responses_node.py: create, stream, and resume with starting_after.
import OpenAI from "openai";
const client = new OpenAI({ baseURL: process.env.BASE_URL, apiKey: process.env.API_KEY, maxRetries: 0 });
const created = await client.responses.create({ model: "flagship", input: "Explain loops.", max_output_tokens: 200,
                                                instructions: "Be terse.", metadata: { from: "node" } });
const events = [];
const stream = await client.responses.create({ model: "flagship", input: "Explain lists.", max_output_tokens: 200,
                                               stream: true, background: true });
for await (const event of stream) events.push(event);
const id = events[0].response.id;
const resumed = [];
for await (const event of await client.responses.retrieve(id, { stream: true, starting_after: 5 })) resumed.push(event);
const retrieved = await client.responses.retrieve(id);
console.log(JSON.stringify({ created, events, resumed, retrieved }));
