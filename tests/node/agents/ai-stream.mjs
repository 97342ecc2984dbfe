// The Vercel AI SDK's streamText with a tool, steps until the model answers; an error part
// of the stream (a replay miss) is the agent's error: node ai-stream.mjs openai|anthropic TASK
import { streamText } from "ai";
import { callsOf, model, settings } from "./ai-sdk.mjs";
import { finish } from "./common.mjs";

const [provider, task] = process.argv.slice(2);

async function agent() {
  const result = streamText({ model: model(provider), prompt: task, ...settings });
  const pieces = [];
  for await (const part of result.fullStream) {
    if (part.type === "text-delta") pieces.push(part.text);
    if (part.type === "error") throw part.error;
  }
  return { calls: callsOf(await result.steps), pieces, text: pieces.join("") };
}

finish(agent());
