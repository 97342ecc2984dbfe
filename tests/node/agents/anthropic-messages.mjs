// @anthropic-ai/sdk's Messages in a tool loop, whole answers.
import Anthropic from "@anthropic-ai/sdk";
import { add, addSchema, finish, key, task } from "./common.mjs";

const client = new Anthropic({ apiKey: key("ANTHROPIC_API_KEY") });
const tools = [{ name: "add", description: "a + b", input_schema: addSchema }];

async function agent() {
  const messages = [{ role: "user", content: task }];
  const calls = [];
  for (;;) {
    const message = await client.messages.create({
      model: "claude-test",
      max_tokens: 256,
      messages,
      tools,
    });
    messages.push({ role: "assistant", content: message.content });
    const asked = message.content.filter((block) => block.type === "tool_use");
    if (!asked.length) return { calls, text: message.content.map((b) => b.text).join("") };
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
