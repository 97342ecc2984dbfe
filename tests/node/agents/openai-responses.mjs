// The openai SDK's Responses API in a tool loop: the output items go back as input, each
// function call answered by a function_call_output.
import OpenAI from "openai";
import { add, addSchema, finish, key, task } from "./common.mjs";

const client = new OpenAI({ apiKey: key("OPENAI_API_KEY") });
const tools = [{ type: "function", name: "add", parameters: addSchema, strict: false }];

async function agent() {
  const input = [{ role: "user", content: task }];
  const calls = [];
  for (;;) {
    const response = await client.responses.create({ model: "gpt-test", input, tools });
    input.push(...response.output);
    const asked = response.output.filter((item) => item.type === "function_call");
    if (!asked.length) return { calls, text: response.output_text };
    for (const call of asked) {
      const args = JSON.parse(call.arguments);
      calls.push(args);
      input.push({ type: "function_call_output", call_id: call.call_id, output: String(add(args)) });
    }
  }
}

finish(agent());
