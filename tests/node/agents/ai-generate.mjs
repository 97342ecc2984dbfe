// The Vercel AI SDK's generateText with a tool, steps until the model answers:
// node ai-generate.mjs openai|anthropic TASK
import { generateText } from "ai";
import { callsOf, model, settings } from "./ai-sdk.mjs";
import { finish } from "./common.mjs";

const [provider, task] = process.argv.slice(2);

async function agent() {
  const result = await generateText({ model: model(provider), prompt: task, ...settings });
  return { calls: callsOf(result.steps), text: result.text };
}

finish(agent());
