// @anthropic-ai/sdk's Messages streamed (messages.stream) in a tool loop: the text as it
// arrives, the tool calls from the final message the stream assembles.
import Anthropic from "@anthropic-ai/sdk";
import { add, addSchema, finish, key, task } from "./common.mjs";

const client = new Anthropic({ apiKey: key("ANTHROPIC_API_KEY") });
const tools = [{ name: "add", description: "a + b", input_schema: addSchema }];

async function agent() {
  const messages = [{ role: "user", content: task }];
  const calls = [];
  const pieces = [];
  for (;;) {
    const stream = client.messages.stream({
      model: "claude-test",
      max_tokens: 256,
      messages,
      tools,
    });
    stream.on("text", (text) => pieces.push(text));
    const message = await stream.finalMessage();
    messages.push({ role: "assistant", content: message.content });
    const asked = message.content.filter((block) => block.type === "tool_use");
    if (!asked.length) return { calls, pieces, text: pieces.join("") };
    calls.push(...asked.map((block) => block.input));
    messages.push({
      role: "user",
      content: asked.map((block) => ({
        type: "tool_result",
        tool_use_id: block.id,
        content: String(add(block.input)),
      })),
    });
  }
}

finish(agent());
