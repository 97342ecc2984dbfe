// @aws-sdk/client-bedrock-runtime's Converse (or ConverseStream with `stream`) in a tool
// loop: each toolUse answered by a toolResult. node bedrock-converse.mjs [stream] TASK
import {
  BedrockRuntimeClient,
  ConverseCommand,
  ConverseStreamCommand,
} from "@aws-sdk/client-bedrock-runtime";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { add, addSchema, finish } from "./common.mjs";

const stream = process.argv[2] === "stream";
const task = process.argv[stream ? 3 : 2];
// AWS_ENDPOINT_URL_BEDROCK_RUNTIME (set by tracetape run --proxy), the region and the
// credentials are read by the SDK itself; its default handler speaks HTTP/2 only, which the
// proxy does not: the HTTP/1.1 one
const client = new BedrockRuntimeClient({ requestHandler: new NodeHttpHandler() });
const modelId = "us.anthropic.claude-sonnet-4-20250514-v1:0";
const toolConfig = { tools: [{ toolSpec: { name: "add", inputSchema: { json: addSchema } } }] };

async function turn(messages, pieces) {
  const request = { modelId, messages, toolConfig };
  if (!stream) return (await client.send(new ConverseCommand(request))).output.message;
  const blocks = [];
  const answer = await client.send(new ConverseStreamCommand(request));
  for await (const event of answer.stream) {
    if (event.contentBlockStart?.start?.toolUse) {
      const { toolUseId, name } = event.contentBlockStart.start.toolUse;
      const index = event.contentBlockStart.contentBlockIndex;
      blocks[index] = { toolUse: { toolUseId, name, input: "" } };
    } else if (event.contentBlockDelta) {
      const { contentBlockIndex: index, delta } = event.contentBlockDelta;
      if (delta.toolUse) blocks[index].toolUse.input += delta.toolUse.input;
      else {
        pieces.push(delta.text);
        blocks[index] = { text: (blocks[index]?.text ?? "") + delta.text };
      }
    }
  }
  for (const { toolUse } of blocks) if (toolUse) toolUse.input = JSON.parse(toolUse.input);
  return { role: "assistant", content: blocks };
}

async function agent() {
  const messages = [{ role: "user", content: [{ text: task }] }];
  const calls = [];
  const pieces = [];
  for (;;) {
    const message = await turn(messages, pieces);
    messages.push(message);
    const asked = message.content.filter((block) => block.toolUse);
    if (!asked.length) {
      const text = message.content.map((block) => block.text ?? "").join("");
      return stream ? { calls, pieces, text } : { calls, text };
    }
    messages.push({
      role: "user",
      content: asked.map(({ toolUse }) => {
        calls.push(toolUse.input);
        const content = [{ text: String(add(toolUse.input)) }];
        return { toolResult: { toolUseId: toolUse.toolUseId, content } };
      }),
    });
  }
}

finish(agent());
