// The openai SDK's Chat Completions streamed (stream: true) in a tool loop: each chunk's
// delta assembled into the message, the pieces kept to show the stream replays chunk for chunk.
import OpenAI from "openai";
import { add, addSchema, finish, key, task } from "./common.mjs";

const client = new OpenAI({ apiKey: key("OPENAI_API_KEY") });
const tools = [{ type: "function", function: { name: "add", parameters: addSchema } }];

async function turn(messages, pieces) {
  const stream = await client.chat.completions.create({
    model: "gpt-test",
    messages,
    tools,
    stream: true,
    stream_options: { include_usage: true },
  });
  const message = { role: "assistant", content: "", tool_calls: [] };
  for await (const chunk of stream) {
    const delta = chunk.choices[0]?.delta ?? {};
    if (delta.content) {
      pieces.push(delta.content);
      message.content += delta.content;
    }
    for (const part of delta.tool_calls ?? []) {
      const call = (message.tool_calls[part.index] ??= {
        id: part.id,
        type: "function",
        function: { name: part.function?.name, arguments: "" },
      });
      call.function.arguments += part.function?.arguments ?? "";
    }
  }
  if (!message.tool_calls.length) delete message.tool_calls;
  return message;
}

async function agent() {
  const messages = [{ role: "user", content: task }];
  const calls = [];
  const pieces = [];
  for (;;) {
    const message = await turn(messages, pieces);
    messages.push(message);
    if (!message.tool_calls) return { calls, pieces, text: message.content };
    for (const call of message.tool_calls) {
      const args = JSON.parse(call.function.arguments);
      calls.push(args);
      messages.push({ role: "tool", tool_call_id: call.id, content: String(add(args)) });
    }
  }
}

finish(agent());
