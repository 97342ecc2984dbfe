// The Vercel AI SDK's shared part: the model of a provider (`openai`: @ai-sdk/openai, whose
// default model speaks the Responses API; `anthropic`: @ai-sdk/anthropic) and the add tool.
import { anthropic } from "@ai-sdk/anthropic";
import { openai } from "@ai-sdk/openai";
import { jsonSchema, stepCountIs, tool } from "ai";
import { add, addSchema } from "./common.mjs";

process.env.OPENAI_API_KEY ||= "placeholder-key";
process.env.ANTHROPIC_API_KEY ||= "placeholder-key";

export function model(provider) {
  if (provider === "openai") return openai("gpt-test");
  if (provider === "anthropic") return anthropic("claude-test");
  throw new Error(`no provider ${provider}: use openai or anthropic`);
}

export const tools = {
  add: tool({ description: "a + b", inputSchema: jsonSchema(addSchema), execute: async (args) => add(args) }),
};

// the fake models are unknown to the SDK: without a bound it warns on every call
export const settings = { tools, stopWhen: stepCountIs(10), maxOutputTokens: 1024 };

export const callsOf = (steps) => steps.flatMap((step) => step.toolCalls.map((call) => call.input));
