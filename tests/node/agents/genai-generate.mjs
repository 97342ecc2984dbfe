// @google/genai's generateContent (or generateContentStream with `stream`) in a function-
// calling loop: the model's turn goes back as it came (its thoughtSignature too), each call
// answered by a functionResponse. node genai-generate.mjs [stream] TASK
import { GoogleGenAI } from "@google/genai";
import { add, addSchema, finish, key } from "./common.mjs";

const stream = process.argv[2] === "stream";
const task = process.argv[stream ? 3 : 2];
// GOOGLE_GEMINI_BASE_URL (set by tracetape run --proxy) is read by the SDK itself
const ai = new GoogleGenAI({ apiKey: key("GEMINI_API_KEY") });
const config = { tools: [{ functionDeclarations: [{ name: "add", parametersJsonSchema: addSchema }] }] };

async function turn(contents, pieces) {
  const request = { model: "gemini-2.5-flash", contents, config };
  if (!stream) {
    const response = await ai.models.generateContent(request);
    return response.candidates[0].content;
  }
  const parts = [];
  for await (const chunk of await ai.models.generateContentStream(request)) {
    for (const part of chunk.candidates?.[0]?.content?.parts ?? []) {
      if (part.text) pieces.push(part.text);
      parts.push(part);
    }
  }
  return { role: "model", parts };
}

async function agent() {
  const contents = [{ role: "user", parts: [{ text: task }] }];
  const calls = [];
  const pieces = [];
  for (;;) {
    const content = await turn(contents, pieces);
    contents.push(content);
    const asked = content.parts.filter((part) => part.functionCall);
    if (!asked.length) {
      const text = content.parts.map((part) => part.text ?? "").join("");
      return stream ? { calls, pieces, text: pieces.join("") } : { calls, text };
    }
    contents.push({
      role: "user",
      parts: asked.map(({ functionCall: { name, args } }) => {
        calls.push(args);
        return { functionResponse: { name, response: { result: add(args) } } };
      }),
    });
  }
}

finish(agent());
