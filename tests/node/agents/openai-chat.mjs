// The openai SDK's Chat Completions in a tool loop, whole answers.
import OpenAI from "openai";
import { add, addSchema, finish, key, task } from "./common.mjs";

const client = new OpenAI({ apiKey: key("OPENAI_API_KEY") });
const tools = [{ type: "function", function: { name: "add", parameters: addSchema } }];

async function agent() {
  const messages = [{ role: "user", content: task }];
  const calls = [];
  for (;;) {
    const answer = await client.chat.completions.create({ model: "gpt-test", messages, tools });
    const message = answer.choices[0].message;
    messages.push(message);
    if (!message.tool_calls?.length) return { calls, text: message.content };
    for (const call of message.tool_calls) {
      const args = JSON.parse(call.function.arguments);
      calls.push(args);
      messages.push({ role: "tool", tool_call_id: call.id, content: String(add(args)) });
    }
  }
}

finish(agent());
